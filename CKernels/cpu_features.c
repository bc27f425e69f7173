/*
 * cpu_features.c — run-time CPU-feature detection.
 *
 * x86-64: `__builtin_cpu_supports`, which also checks that the operating
 * system saves the wide registers (XCR0), so a feature reported here is one
 * the kernels may use. arm64: the auxiliary vector on Linux, sysctl on Darwin.
 */
#include <string.h>
#include "ek_cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif
#if defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

ek_cpu_features ek_cpu_features_detect(void) {
    ek_cpu_features f;
    memset(&f, 0, sizeof f);
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.f16c = __builtin_cpu_supports("f16c");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
    f.avxvnni = __builtin_cpu_supports("avxvnni");
    f.amd = __builtin_cpu_is("amd");
#elif defined(__aarch64__)
    f.neon = true; /* Advanced SIMD is mandatory on AArch64. */
#if defined(__linux__)
    unsigned long hwcap = getauxval(AT_HWCAP);
    f.neon = (hwcap & HWCAP_ASIMD) != 0;
    f.dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
#elif defined(__APPLE__)
    int value = 0;
    size_t size = sizeof value;
    if (sysctlbyname("hw.optional.arm.FEAT_DotProd", &value, &size, NULL, 0) == 0) {
        f.dotprod = value != 0;
    }
#endif
#endif
    return f;
}

bool ek_cpu_brand(char *buffer, size_t capacity) {
    if (buffer == NULL || capacity == 0) return false;
    buffer[0] = '\0';
#if defined(__x86_64__) || defined(__i386__)
    unsigned int max_leaf = __get_cpuid_max(0x80000000u, NULL);
    if (max_leaf < 0x80000004u) return false;
    unsigned int regs[12];
    for (unsigned int i = 0; i < 3; i++) {
        __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
    }
    char brand[49];
    memcpy(brand, regs, 48);
    brand[48] = '\0';
    /* The brand string is padded with spaces on either side. */
    const char *start = brand;
    while (*start == ' ') start++;
    size_t length = strlen(start);
    while (length > 0 && start[length - 1] == ' ') length--;
    if (length == 0) return false;
    if (length >= capacity) length = capacity - 1;
    memcpy(buffer, start, length);
    buffer[length] = '\0';
    return true;
#else
    return false;
#endif
}
