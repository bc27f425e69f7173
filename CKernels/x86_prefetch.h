/*
 * x86_prefetch.h — private to CKernels: how the x86 kernels ask for weights ahead of their loads.
 */
#ifndef EK_X86_PREFETCH_H
#define EK_X86_PREFETCH_H

#include <immintrin.h>
#include <stddef.h>

/* The level every x86 kernel's software prefetch of weights asks for: L2 (T1), not L1 (T0). The weights are read
   once, so L1 gains nothing from holding them early, and on AMD cores a T0 prefetch holds one of L1's few miss
   buffers until its line arrives from memory — with a line asked ahead for every block, the kernel's own loads
   then wait for buffers. On a Zen 4 (2 threads, 16384×8192 from memory, alternating builds) the interleaved
   Q4_K / Q5_K / Q6_K decode GEMVs read 15–17 / 13–16 / 10–12 GB/s with T0 and 28 / 27–28 / 18 with T1, where a
   two-thread read loop made 30–34; T2 measured like T1, NTA like T0. An experiment may override it with -D. */
#ifndef EK_PREFETCH_HINT
#define EK_PREFETCH_HINT _MM_HINT_T1
#endif

/* How far ahead of its loads a kernel streaming weights asks for them, in bytes — one distance for every kernel and
   for the bandwidth reference's read loop. 8 KB, not the 4 KB tuned with T0 prefetches: with T1 the longer distance
   keeps more lines in flight per core. One Zen 4 core, 16384×8192 from memory, medians of 5 alternating rounds:
   interleaved Q4_K 16.0 → 20.5 GB/s, Q6_K 12.2 → 17.9 (16 KB: 20.2 and 13.7). Two threads, `ember bench kernels`,
   3 alternating rounds, weight GB/s: AVX-512 Q4_0 22.6 → 27.4, Q4_K 24.2 → 28.3, Q5_K 20.8 → 23.1, Q6_K 19.7 → 24.8,
   Q5_0 22.5 → 26.7, Q8_0 22.4 → 26.8; avx2 Q4_0 22.4 → 26.2, Q5_K 24.1 → 26.6, the others within noise. SmolLM2
   decode moved within noise but for Q4_K_M (+6–9 %). An experiment may override it with -D. */
#ifndef EK_PREFETCH_AHEAD
#define EK_PREFETCH_AHEAD 8192
#endif

/* The decode GEMV's distance and level on Intel cores: the 512-bit interleaved tiles of one activation row
   (x86_interleaved_wide.h) and the packed Q4_0/Q4_1 pairs of one row (x86_avx512_body.h), which only Intel cores run —
   AMD's decode takes the 256-bit tiles (interleave.c) and single packed groups, and keeps the T1 prefetches above, T0
   having measured far slower there. 2 KB ahead into L1: one Emerald Rapids (a 2-vCPU VM), two threads, 16384×8192
   cycled from memory (1 GiB of copies), a C harness over these kernels, medians of 5–6 alternating rounds against T1
   at 8 KB: Q4_K 1.00–1.12×, Q5_K 1.04×, Q6_K 1.07–1.11×, Q5_0 1.07×, IQ4_XS 1.04×, Q4_0 1.14×, Q4_1 1.15× (T0 at
   8 KB 1.05–1.08×; T0 at 1 and 4 KB within a few % of 2; NTA 0.6–0.7×). The packed Q8_0 GEMV measured 0.92× with it
   and keeps T1: it computes less per byte, and T1 already had it near the read loop's rate. docs/KERNELS.md has the
   `ember bench kernels` shares. */
#ifndef EK_PREFETCH_NEAR_HINT
#define EK_PREFETCH_NEAR_HINT _MM_HINT_T0
#endif
#ifndef EK_PREFETCH_NEAR_AHEAD
#define EK_PREFETCH_NEAR_AHEAD 2048
#endif

/* Asks for the `bytes` that lie EK_PREFETCH_AHEAD past `block` (with `near`, a constant: EK_PREFETCH_NEAR_AHEAD past
   it, at EK_PREFETCH_NEAR_HINT), a line at a time: how every streaming kernel fetches ahead of the block it is about
   to read. */
static inline __attribute__((always_inline)) void ek_prefetch_at(const void *block, size_t bytes, const int near) {
    for (size_t line = 0; line < bytes; line += 64) {
        if (near) _mm_prefetch((const char *)block + EK_PREFETCH_NEAR_AHEAD + line, EK_PREFETCH_NEAR_HINT);
        else _mm_prefetch((const char *)block + EK_PREFETCH_AHEAD + line, EK_PREFETCH_HINT);
    }
}
static inline __attribute__((always_inline)) void ek_prefetch_ahead(const void *block, size_t bytes) {
    ek_prefetch_at(block, bytes, 0);
}

/* Part `part` of `parts` of ek_prefetch_at(block, bytes, near): the lines ahead of bytes
   [bytes·part/parts, bytes·(part + 1)/parts) of the block. Kernels that compute for long on each block (the
   K-quants' and IQ4_XS's 1.1–1.7 KB group-blocks of the decode GEMV) ask for each part as they start on it, so that
   their requests reach memory spread through the block's work rather than 17–27 at once: a burst fills the core's
   queue of outstanding misses, and lines asked for later wait while memory idles between bursts. One Zen 3 (AVX2,
   two threads, 16384×8192 from memory, medians of 6–8 alternating pairs in one process, against one burst a block):
   Q6_K in 8 parts 1.43×, in 2 parts 1.29×; Q4_K in 4 parts 1.13×, Q5_K 1.10×; 8 parts measured no better for them. */
static inline __attribute__((always_inline)) void ek_prefetch_part(const void *block, size_t bytes, int part, int parts,
                                                                   const int near) {
    const size_t begin = bytes * (size_t)part / (size_t)parts, end = bytes * (size_t)(part + 1) / (size_t)parts;
    ek_prefetch_at((const char *)block + begin, end - begin, near);
}
static inline __attribute__((always_inline)) void ek_prefetch_ahead_part(const void *block, size_t bytes, int part, int parts) {
    ek_prefetch_part(block, bytes, part, parts, 0);
}

#endif /* EK_X86_PREFETCH_H */
