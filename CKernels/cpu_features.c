/*
 * cpu_features.c — run-time CPU-feature detection.
 *
 * x86-64: `__builtin_cpu_supports`, which also checks that the operating
 * system saves the wide registers (XCR0), so a feature reported here is one
 * the kernels may use. arm64: the auxiliary vector on Linux, sysctl on Darwin.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* syscall(2) under -std=c11 */
#endif
#include <string.h>
#include "ek_cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__x86_64__)
#include <stdatomic.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
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

#if defined(__x86_64__)
/* AMX-TILE and AMX-INT8 (CPUID 7.0 EDX bits 24 and 25) with their state enabled in XCR0 (bits 17 and 18). */
static bool amx_int8_read(void) {
    unsigned int eax, ebx, ecx, edx;
    if (__get_cpuid_max(0, NULL) < 7 || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) ||
        (edx & (3u << 24)) != (3u << 24))
        return false;
    __get_cpuid(1, &eax, &ebx, &ecx, &edx);
    if (!(ecx & (1u << 27))) return false; /* no OSXSAVE: XGETBV may not run */
    unsigned int xcr0_low, xcr0_high;
    __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    return (xcr0_low & (3u << 17)) == (3u << 17);
}

/* amx_int8_read, read once: every kernel call detects the features, and under a hypervisor each CPUID exits to it
   (3.7 µs measured in a KVM guest — three of them were 11 µs on every product). */
static bool amx_int8_present(void) {
    static _Atomic int cached = 0; /* 0 not read yet, 1 present, 2 not */
    int known = atomic_load_explicit(&cached, memory_order_acquire);
    if (known == 0) {
        known = amx_int8_read() ? 1 : 2;
        atomic_store_explicit(&cached, known, memory_order_release);
    }
    return known == 1;
}
#endif

bool ek_amx_tiles_granted(void) {
#if defined(__x86_64__) && defined(__linux__)
    static _Atomic int cached = 0; /* 0 not asked yet, 1 granted, 2 not */
    int known = atomic_load_explicit(&cached, memory_order_acquire);
    if (known != 0) return known == 1;
    const long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
    const bool granted = amx_int8_present() && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    atomic_store_explicit(&cached, granted ? 1 : 2, memory_order_release);
    return granted;
#else
    return false; /* other systems: not yet asked how they grant the tile state */
#endif
}

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
#if defined(__x86_64__)
    f.amx_int8 = f.avx512vnni && amx_int8_present();
#endif
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
