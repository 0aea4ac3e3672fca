// The pi0.5 megakernels (kernels/pi05) as one translation unit for cgo.
#include "../kernels/pi05/pi05_model.c"
#include "../kernels/pi05/pi05_ops.c"
#include "../kernels/pi05/pi05_vision.c"
#include "../kernels/pi05/pi05_prefix.c"
#include "../kernels/pi05/pi05_expert.c"
#include "../kernels/pi05/pi05_api.c"
#include "../kernels/pi05/pi05_slab_blob.c"
#include "../kernels/pi05/pi05_plan.c"
