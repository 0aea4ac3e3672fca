// The shared kernels (kernels/common) as one translation unit for cgo.
#include "../kernels/common/tt_cpu.c"
#include "../kernels/common/tt_pool.c"
#include "../kernels/common/tt_ops.c"
#include "../kernels/common/tt_gemm.c"
#include "../kernels/common/tt_gemm_plan.c"
#include "../kernels/common/tt_arena.c"
#include "../kernels/common/tt_attention.c"
#include "../kernels/common/tt_selftest.c"
