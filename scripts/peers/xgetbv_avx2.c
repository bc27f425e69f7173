// The AVX2 kind of our pool for a peer on a CPU that cannot fault on CPUID (AMD, and KVM guests on AMD): a preload
// library that answers the XGETBV instructions scripts/peers/xgetbv_avx2.py marked in a copy of the peer's libraries
// with an XCR0 whose AVX-512 state bits (opmask, ZMM_Hi256, Hi16_ZMM: 5–7) and AMX tile bits (17–18) are clear.
//
// Why XCR0: a library that picks AVX-512 kernels at run time must also ask the OS whether it saves the ZMM registers
// (XGETBV with ECX = 0), and ONNX Runtime's MLAS, its CPUIDInfo and numpy do; with those bits clear they take their
// AVX2 + FMA kernels, as on a Zen 3 (which has no VNNI of either kind). CPUID itself is left alone — only
// scripts/peers/cpuid_avx2.c, where CPUID faulting exists, can hide it.
//
// How: xgetbv_avx2.py rewrites each XGETBV (0F 01 D0) it finds by disassembly into 0F 0B D0 — UD2 followed by
// XGETBV's last byte, a form no compiler emits — so executing it raises SIGILL; the handler here checks those three
// bytes, runs the real XGETBV for the ECX asked, clears the bits above when ECX = 0, writes EDX:EAX and steps over
// the three bytes. Any other SIGILL goes to the handler the program installed, or ends the process as it would have.
//
// Build: cc -O2 -shared -fPIC -o xgetbv_avx2.so xgetbv_avx2.c -ldl
// Use:   LD_PRELOAD=./xgetbv_avx2.so PYTHONPATH=<the patched copy> python ...
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

// XCR0 bits a Zen 3 does not set: AVX-512 state (5, 6, 7) and AMX tile state (17, 18).
#define HIDDEN_XCR0_BITS ((1u << 5) | (1u << 6) | (1u << 7) | (1u << 17) | (1u << 18))

#define HELD_SIGNAL SIGILL
#include "held_signal.h"

static void on_sigill(int sig, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *g = uc->uc_mcontext.gregs;
    const uint8_t *ip = (const uint8_t *)g[REG_RIP];
    if (ip[0] != 0x0F || ip[1] != 0x0B || ip[2] != 0xD0) {
        forward_fault(sig, info, context);
        return;
    }
    uint32_t xcr = (uint32_t)g[REG_RCX], lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(xcr));
    if (xcr == 0) lo &= ~HIDDEN_XCR0_BITS;
    g[REG_RAX] = lo;  // XGETBV zero-extends into RAX and RDX
    g[REG_RDX] = hi;
    g[REG_RIP] += 3;
}

__attribute__((constructor)) static void hold_xcr0_to_avx2(void) {
    if (install_held_handler(on_sigill) == 0) holding = 1;
    else fprintf(stderr, "xgetbv_avx2: could not install the SIGILL handler; marked XGETBVs will end the process\n");
}
