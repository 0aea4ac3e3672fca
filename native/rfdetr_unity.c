// The RF-DETR megakernel (kernels/rfdetr) as one translation unit for cgo.
#include "../kernels/rfdetr/rfdetr.c"
