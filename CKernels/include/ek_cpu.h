/*
 * ek_cpu.h — CPU-feature detection and the choice of kernel ISA.
 *
 * Detection runs at run time (`__builtin_cpu_supports` on x86, the auxiliary
 * vector or sysctl on arm64), so one binary carries every ISA variant, each
 * compiled with a per-function `__attribute__((target(...)))`, and picks the
 * best one the CPU and the operating system support.
 */
#ifndef EK_CPU_H
#define EK_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include "ek_status.h"

/* The instruction-set features the kernels care about. */
typedef struct ek_cpu_features {
    /* x86-64 */
    bool avx2;
    bool fma;
    bool f16c;
    bool avx512f;
    bool avx512bw;
    bool avx512vl;
    bool avx512vnni;
    bool avxvnni;
    bool amx_int8; /* AMX-TILE and AMX-INT8 with their state enabled by the OS (granted to a process on first use:
                      ek_amx_tiles_granted) */
    bool amd; /* an AMD core (CPUID vendor): decode GEMVs stream in the form measured fastest there (ek_gemm_f32,
                 ek_gemm_interleaved) */
    /* arm64 */
    bool neon;
    bool dotprod;
} ek_cpu_features;

/* The features of the CPU this process runs on (detected once, then cached). */
ek_cpu_features ek_cpu_features_detect(void);

/*
 * Whether this process may run AMX tile instructions: the CPU has AMX-INT8 and, on Linux, the kernel granted the tile
 * data (arch_prctl ARCH_REQ_XCOMP_PERM, required before the first tile instruction, which faults without it). Asked
 * the first time the AMX kernels are about to run — not at detection, since a grant makes the kernel refuse
 * alternate signal stacks too small for the tile state in every thread of the host process — and cached. False on
 * other systems.
 */
bool ek_amx_tiles_granted(void);

/*
 * Writes the CPU's marketing name (the CPUID brand string on x86) into
 * `buffer`, NUL-terminated. Returns false when the CPU does not say; the
 * caller then falls back to the operating system's description.
 */
bool ek_cpu_brand(char *buffer, size_t capacity);

/* The kernel families Ember ships, from the portable oracle to the widest SIMD. */
typedef enum ek_isa {
    EK_ISA_SCALAR = 0,  /* portable C: the `_ref` oracle of every kernel       */
    EK_ISA_AVX2 = 1,    /* AVX2 + FMA + F16C, and AVX-VNNI when the CPU has it */
    EK_ISA_AVX512 = 2,  /* AVX-512 F/BW/VL + VNNI on 512-bit registers, and AMX
                           tiles for int8 products where the CPU has them  */
    EK_ISA_NEON = 3,    /* arm64 NEON with the dot-product instructions        */
    EK_ISA_AVX2_PLAIN = 4, /* AVX2 + FMA + F16C without AVX-VNNI, even where
                              the CPU has it ("avx2-novnni"), to test that code */
    EK_ISA_AVX512_PLAIN = 5, /* the AVX-512 kernels without AMX even where the
                                CPU has it ("avx512-noamx"), as AMD's AVX-512 cores run */
    EK_ISA_AVX512_NOVNNI = 6, /* AVX-512 F/BW/VL without VNNI ("avx512-novnni"): int8
                                 products by VPMADDUBSW + VPMADDWD, as Skylake-SP/X
                                 need; on a VNNI CPU only when forced */
} ek_isa;

/* Lower-case name of an ISA as EMBER_ISA spells it ("scalar", "avx2", "avx2-novnni", …). */
const char *ek_isa_name(ek_isa isa);

/* Parses an EMBER_ISA value. EK_ERR_NULL_POINTER or EK_ERR_UNKNOWN_ISA on failure. */
ek_status ek_isa_parse(const char *name, ek_isa *out);

/* Whether `isa` is one of the AVX-512 ISAs (with or without VNNI or AMX): the ops that need only AVX-512 F/BW/VL
   take their 512-bit forms under each of them. */
bool ek_isa_is_avx512(ek_isa isa);

/* Whether this build and CPU can run the kernels of `isa`. */
bool ek_isa_supported(ek_isa isa, const ek_cpu_features *features);

/* The widest ISA that `features` support. */
ek_isa ek_isa_best(const ek_cpu_features *features);

/*
 * The ISA the kernels use: `override` (the EMBER_ISA value, or NULL/"" for
 * automatic) when it names an ISA this CPU supports, otherwise the best one.
 * Returns EK_ERR_UNKNOWN_ISA or EK_ERR_ISA_UNSUPPORTED for a bad override and
 * then leaves `*out` at the best supported ISA.
 */
ek_status ek_isa_select(const char *override, const ek_cpu_features *features, ek_isa *out);

#endif /* EK_CPU_H */
