// A preload library that makes a process see an AVX2 + FMA CPU without AVX-512, VNNI or AMX (the Zen 3 kind of our
// pool), so that a peer which picks its kernels from CPUID at run time — ONNX Runtime's MLAS, numpy — can be measured
// ISA for ISA against Ember's EMBER_ISA=avx2-novnni path on an AVX-512 machine.
//
// How: Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, the `cpuid_fault` flag in /proc/cpuinfo; Intel CPUs and
// KVM guests on them). With it on, every CPUID instruction in user space raises SIGSEGV; the handler here runs the
// real CPUID with faulting briefly off, clears the feature bits listed below, writes the registers back and steps
// over the instruction. The setting is per thread and inherited by threads created later, so turning it on in a
// constructor (before the program starts threads) covers the whole process. It is reset by execve.
//
// Programs install SIGSEGV handlers of their own: held_signal.h records them and forwards every SIGSEGV that is
// not a CPUID to them.
//
// Limits, said plainly: code that read CPUID before this constructor ran (glibc's own string functions pick their
// variants first) keeps what it found; XGETBV cannot be trapped, but every library we know checks the CPUID bits
// before it. Where faulting is not available, the library says so on stderr and exits with status 3 unless
// CPUID_AVX2_OPTIONAL=1 is set, so no figure is ever quoted as "held to AVX2" when it was not.
//
// Build: cc -O2 -shared -fPIC -o cpuid_avx2.so cpuid_avx2.c   Use: LD_PRELOAD=./cpuid_avx2.so program ...
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef ARCH_SET_CPUID
#define ARCH_SET_CPUID 0x1012
#endif

static void real_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t out[4]) {
    __asm__ volatile("cpuid" : "=a"(out[0]), "=b"(out[1]), "=c"(out[2]), "=d"(out[3]) : "a"(leaf), "c"(subleaf));
}

static long set_cpuid_enabled(int enabled) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled); }

// The bits an AVX2 + FMA machine without VNNI does not have (Intel SDM vol. 2A, CPUID leaf 7).
static void hide_features(uint32_t leaf, uint32_t subleaf, uint32_t r[4]) {
    if (leaf == 7 && subleaf == 0) {
        // EBX: AVX512F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31.
        r[1] &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31));
        // ECX: VBMI 1, VBMI2 6, GFNI 8 (Zen 3 has none), VNNI 11, BITALG 12, VPOPCNTDQ 14.
        r[2] &= ~((1u << 1) | (1u << 6) | (1u << 8) | (1u << 11) | (1u << 12) | (1u << 14));
        // EDX: 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8, AMX-BF16 22, AVX512-FP16 23, AMX-TILE 24, AMX-INT8 25.
        r[3] &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
    } else if (leaf == 7 && subleaf == 1) {
        // EAX: AVX-VNNI 4, AVX512-BF16 5, AMX-FP16 21, AVX-IFMA 23. EDX: AVX-VNNI-INT8 4, AVX-NE-CONVERT 5,
        // AMX-COMPLEX 8, AVX-VNNI-INT16 10, AVX10 19.
        r[0] &= ~((1u << 4) | (1u << 5) | (1u << 21) | (1u << 23));
        r[3] &= ~((1u << 4) | (1u << 5) | (1u << 8) | (1u << 10) | (1u << 19));
    } else if (leaf == 0xD && subleaf == 0) {
        // XSAVE components the hidden features would need: opmask/ZMM (5–7), AMX tiles (17–18).
        r[0] &= ~((1u << 5) | (1u << 6) | (1u << 7) | (1u << 17) | (1u << 18));
    } else if (leaf == 0x1D || leaf == 0x1E || leaf == 0x24) {
        r[0] = r[1] = r[2] = r[3] = 0;  // AMX tile and AVX10 leaves
    }
}

#define HELD_SIGNAL SIGSEGV
#include "held_signal.h"

static void on_sigsegv(int sig, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *g = uc->uc_mcontext.gregs;
    const uint8_t *ip = (const uint8_t *)g[REG_RIP];
    if (info->si_code != SI_KERNEL || ip[0] != 0x0F || ip[1] != 0xA2) {
        forward_fault(sig, info, context);
        return;
    }
    uint32_t leaf = (uint32_t)g[REG_RAX], subleaf = (uint32_t)g[REG_RCX], r[4];
    set_cpuid_enabled(1);
    real_cpuid(leaf, subleaf, r);
    set_cpuid_enabled(0);
    hide_features(leaf, subleaf, r);
    g[REG_RAX] = r[0];
    g[REG_RBX] = r[1];
    g[REG_RCX] = r[2];
    g[REG_RDX] = r[3];
    g[REG_RIP] += 2;
}

__attribute__((constructor)) static void hold_to_avx2(void) {
    if (install_held_handler(on_sigsegv) == 0 && set_cpuid_enabled(0) == 0) {
        holding = 1;
    } else {
        const char *optional = getenv("CPUID_AVX2_OPTIONAL");
        fprintf(stderr, "cpuid_avx2: this kernel or CPU has no CPUID faulting (no `cpuid_fault` in /proc/cpuinfo), "
                        "so the process cannot be held to AVX2%s\n",
                optional && optional[0] == '1' ? "; going on with the real CPU" : "");
        if (!(optional && optional[0] == '1')) _exit(3);
        restore_default_action(SIGSEGV);
    }
}
