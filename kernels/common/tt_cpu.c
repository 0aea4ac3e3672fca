/* tt_cpu.c: the CPU feature bits (cpuid through __builtin_cpu_supports, leaf 7 and xgetbv for AMX),
 * the isa each allows, the TT_ISA cap, and the Linux permission AMX tiles need.
 * Must not: cache a decision in global state; every call asks again (cheap). The one exception is
 * the AMX permission request, made once per process (the kernel keeps the grant for the process,
 * so the state is the kernel's, mirrored). */
#include "tt_cpu.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* XCR0 through xgetbv; the caller checked OSXSAVE (else the instruction faults). */
static unsigned long long xcr0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

/* AMX-TILE and AMX-BF16 as the CPU (leaf 7 EDX bits 24 and 22) and the OS (XCR0 bits 17 and 18:
 * XTILECFG and XTILEDATA saved on context switches) allow them. */
static int amx_features(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; /* OSXSAVE */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int f = 0;
    int os = (xcr0() & (3ull << 17)) == (3ull << 17);
    if (os && (d & (1u << 24))) f |= TT_CPU_AMXTILE;
    if (os && (d & (1u << 22))) f |= TT_CPU_AMXBF16;
    return f;
}

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
    return f | amx_features();
}

/* Linux hands out the 8 KiB of tile data state only to a process that asks
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); a tile instruction without the grant
 * faults. Asked once per process: the grant is the process's for good. */
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_granted;

static void amx_request(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    amx_granted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    amx_granted = 0;
#endif
}

int tt_cpu_amx_permitted(void)
{
    pthread_once(&amx_once, amx_request);
    return amx_granted;
}

int tt_cpu_supports(tt_isa isa)
{
    int f = tt_cpu_features();
    int avx2 = (f & TT_CPU_AVX2) && (f & TT_CPU_FMA);
    int avx512 = avx2 && (f & TT_CPU_AVX512F) && (f & TT_CPU_AVX512BW) && (f & TT_CPU_AVX512VL) &&
                 (f & TT_CPU_AVX512DQ);
    int bf16 = avx512 && (f & TT_CPU_AVX512BF16);
    switch (isa) {
    case TT_ISA_SCALAR: return 1;
    case TT_ISA_AVX2: return avx2;
    case TT_ISA_AVX512: return avx512;
    case TT_ISA_AVX512BF16: return bf16;
    case TT_ISA_AMXBF16: return bf16 && (f & TT_CPU_AMXTILE) && (f & TT_CPU_AMXBF16) && tt_cpu_amx_permitted();
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
    case TT_ISA_AMXBF16: return "amxbf16";
    }
    return "unknown";
}

tt_isa tt_cpu_best_isa(void)
{
    tt_isa cap = TT_ISA_LAST;
    const char *env = getenv("TT_ISA");
    if (env != NULL) {
        for (int i = TT_ISA_SCALAR; i <= TT_ISA_LAST; i++)
            if (strcmp(env, tt_isa_name((tt_isa)i)) == 0) cap = (tt_isa)i;
    }
    for (int i = cap; i > TT_ISA_SCALAR; i--)
        if (tt_cpu_supports((tt_isa)i)) return (tt_isa)i;
    return TT_ISA_SCALAR;
}
