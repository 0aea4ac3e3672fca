/* tt_cpu: what the host CPU can run, decided once at run time.
 *
 * Kernels are compiled for the baseline x86-64 ISA with per-function target
 * attributes; callers pick an implementation by tt_isa, never by #ifdef, so
 * one binary runs on any x86-64 machine and tests can force every path.
 * Must not: be bypassed by -march flags: what ships is built for baseline x86-64.
 */
#ifndef TT_CPU_H
#define TT_CPU_H

typedef enum {
    TT_ISA_SCALAR = 0,     /* plain C, the reference every fast path is tested against */
    TT_ISA_AVX2 = 1,       /* AVX2 + FMA, 256-bit */
    TT_ISA_AVX512 = 2,     /* AVX-512F/BW/VL/DQ, 512-bit */
    TT_ISA_AVX512BF16 = 3, /* AVX-512 plus AVX512_BF16 (vdpbf16ps) */
    TT_ISA_AMXBF16 = 4,    /* AVX512BF16 plus AMX tiles (tdpbf16ps) for the bf16 GEMM; the OS
                              must save tile state and grant it to the process (Linux asks) */
    TT_ISA_LAST = TT_ISA_AMXBF16,
} tt_isa;

/* Bit set of the features the running CPU has (TT_CPU_* below). */
enum {
    TT_CPU_AVX2 = 1 << 0,
    TT_CPU_FMA = 1 << 1,
    TT_CPU_AVX512F = 1 << 2,
    TT_CPU_AVX512BW = 1 << 3,
    TT_CPU_AVX512VL = 1 << 4,
    TT_CPU_AVX512DQ = 1 << 5,
    TT_CPU_AVX512BF16 = 1 << 6,
    TT_CPU_AVX512VNNI = 1 << 7,
    TT_CPU_AMXTILE = 1 << 8, /* CPU and OS (XCR0 tile state) both */
    TT_CPU_AMXBF16 = 1 << 9,
};

int tt_cpu_features(void);

/* The best ISA this CPU supports, capped by the environment variable
 * TT_ISA=scalar|avx2|avx512|avx512bf16|amxbf16 when set (for tests and triage). */
tt_isa tt_cpu_best_isa(void);

/* Whether the CPU can run code built for isa. For amxbf16 that includes the OS's permission: on
 * Linux the first call asks for it (once per process, thread-safe); refused, AMX is unsupported. */
int tt_cpu_supports(tt_isa isa);

/* Whether this process may use AMX tile data: on Linux the first call asks the kernel
 * (arch_prctl ARCH_REQ_XCOMP_PERM), once per process and thread-safe; later calls only read the
 * answer. Tile code calls it before its first tile instruction (without the grant it faults). */
int tt_cpu_amx_permitted(void);

const char *tt_isa_name(tt_isa isa);

/* Target attribute strings, one per fast ISA. */
#define TT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TT_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define TT_TARGET_AVX512BF16 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")))

#define TT_TARGET_AMXBF16 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,amx-tile,amx-bf16")))

#endif
