/* tt_cpu.c: the CPU feature bits (cpuid through __builtin_cpu_supports), the isa each allows, and
 * the TT_ISA cap. Must not: cache a decision in global state; every call asks again (cheap). */
#include "tt_cpu.h"

#include <stdlib.h>
#include <string.h>

int tt_cpu_features(void)
{
    __builtin_cpu_init();
    int f = 0;
    if (__builtin_cpu_supports("avx2")) f |= TT_CPU_AVX2;
    if (__builtin_cpu_supports("fma")) f |= TT_CPU_FMA;
    if (__builtin_cpu_supports("avx512f")) f |= TT_CPU_AVX512F;
    if (__builtin_cpu_supports("avx512bw")) f |= TT_CPU_AVX512BW;
    if (__builtin_cpu_supports("avx512vl")) f |= TT_CPU_AVX512VL;
    if (__builtin_cpu_supports("avx512dq")) f |= TT_CPU_AVX512DQ;
    if (__builtin_cpu_supports("avx512bf16")) f |= TT_CPU_AVX512BF16;
    if (__builtin_cpu_supports("avx512vnni")) f |= TT_CPU_AVX512VNNI;
    return f;
}

int tt_cpu_supports(tt_isa isa)
{
    int f = tt_cpu_features();
    int avx2 = (f & TT_CPU_AVX2) && (f & TT_CPU_FMA);
    int avx512 = avx2 && (f & TT_CPU_AVX512F) && (f & TT_CPU_AVX512BW) && (f & TT_CPU_AVX512VL) &&
                 (f & TT_CPU_AVX512DQ);
    switch (isa) {
    case TT_ISA_SCALAR: return 1;
    case TT_ISA_AVX2: return avx2;
    case TT_ISA_AVX512: return avx512;
    case TT_ISA_AVX512BF16: return avx512 && (f & TT_CPU_AVX512BF16);
    }
    return 0;
}

const char *tt_isa_name(tt_isa isa)
{
    switch (isa) {
    case TT_ISA_SCALAR: return "scalar";
    case TT_ISA_AVX2: return "avx2";
    case TT_ISA_AVX512: return "avx512";
    case TT_ISA_AVX512BF16: return "avx512bf16";
    }
    return "unknown";
}

tt_isa tt_cpu_best_isa(void)
{
    tt_isa cap = TT_ISA_AVX512BF16;
    const char *env = getenv("TT_ISA");
    if (env != NULL) {
        for (int i = TT_ISA_SCALAR; i <= TT_ISA_AVX512BF16; i++)
            if (strcmp(env, tt_isa_name((tt_isa)i)) == 0) cap = (tt_isa)i;
    }
    for (int i = cap; i > TT_ISA_SCALAR; i--)
        if (tt_cpu_supports((tt_isa)i)) return (tt_isa)i;
    return TT_ISA_SCALAR;
}
