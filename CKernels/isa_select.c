/*
 * isa_select.c — which kernel family runs: the widest the CPU supports,
 * unless EMBER_ISA forces another so tests and benchmarks can exercise each.
 */
#include <string.h>
#include "ek_cpu.h"

const char *ek_isa_name(ek_isa isa) {
    switch (isa) {
    case EK_ISA_SCALAR: return "scalar";
    case EK_ISA_AVX2: return "avx2";
    case EK_ISA_AVX512: return "avx512";
    case EK_ISA_NEON: return "neon";
    case EK_ISA_AVX2_PLAIN: return "avx2-novnni";
    case EK_ISA_AVX512_PLAIN: return "avx512-noamx";
    case EK_ISA_AVX512_NOVNNI: return "avx512-novnni";
    }
    return "unknown";
}

ek_status ek_isa_parse(const char *name, ek_isa *out) {
    if (name == NULL || out == NULL) return EK_ERR_NULL_POINTER;
    static const ek_isa all[] = {EK_ISA_SCALAR, EK_ISA_AVX2, EK_ISA_AVX512, EK_ISA_NEON, EK_ISA_AVX2_PLAIN, EK_ISA_AVX512_PLAIN,
                                 EK_ISA_AVX512_NOVNNI};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, ek_isa_name(all[i])) == 0) {
            *out = all[i];
            return EK_OK;
        }
    }
    return EK_ERR_UNKNOWN_ISA;
}

bool ek_isa_is_avx512(ek_isa isa) {
    return isa == EK_ISA_AVX512 || isa == EK_ISA_AVX512_PLAIN || isa == EK_ISA_AVX512_NOVNNI;
}

bool ek_isa_supported(ek_isa isa, const ek_cpu_features *f) {
    if (f == NULL) return isa == EK_ISA_SCALAR;
    switch (isa) {
    case EK_ISA_SCALAR:
        return true;
    case EK_ISA_AVX2:
    case EK_ISA_AVX2_PLAIN:
#if defined(__x86_64__)
        return f->avx2 && f->fma && f->f16c;
#else
        return false;
#endif
    case EK_ISA_AVX512:
    case EK_ISA_AVX512_PLAIN:
#if defined(__x86_64__)
        return f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni && f->f16c;
#else
        return false;
#endif
    case EK_ISA_AVX512_NOVNNI:
#if defined(__x86_64__)
        return f->avx512f && f->avx512bw && f->avx512vl && f->fma && f->f16c;
#else
        return false;
#endif
    case EK_ISA_NEON:
#if defined(__aarch64__)
        return f->neon && f->dotprod;
#else
        return false;
#endif
    }
    return false;
}

ek_isa ek_isa_best(const ek_cpu_features *f) {
    static const ek_isa widest_first[] = {EK_ISA_AVX512, EK_ISA_AVX512_NOVNNI, EK_ISA_AVX2, EK_ISA_NEON};
    for (size_t i = 0; i < sizeof widest_first / sizeof widest_first[0]; i++) {
        if (ek_isa_supported(widest_first[i], f)) return widest_first[i];
    }
    return EK_ISA_SCALAR;
}

ek_status ek_isa_select(const char *override, const ek_cpu_features *f, ek_isa *out) {
    if (out == NULL) return EK_ERR_NULL_POINTER;
    *out = ek_isa_best(f);
    if (override == NULL || override[0] == '\0' || strcmp(override, "auto") == 0) return EK_OK;
    ek_isa forced;
    ek_status status = ek_isa_parse(override, &forced);
    if (status != EK_OK) return status;
    if (!ek_isa_supported(forced, f)) return EK_ERR_ISA_UNSUPPORTED;
    *out = forced;
    return EK_OK;
}
