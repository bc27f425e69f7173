/*
 * x86_prefetch.h — private to CKernels: how the x86 kernels ask for weights ahead of their loads.
 */
#ifndef EK_X86_PREFETCH_H
#define EK_X86_PREFETCH_H

#include <immintrin.h>

/* The level every x86 kernel's software prefetch of weights asks for: L2 (T1), not L1 (T0). The weights are read
   once, so L1 gains nothing from holding them early, and on AMD cores a T0 prefetch holds one of L1's few miss
   buffers until its line arrives from memory — with a line asked ahead for every block, the kernel's own loads
   then wait for buffers. On a Zen 4 (2 threads, 16384×8192 from memory, alternating builds) the interleaved
   Q4_K / Q5_K / Q6_K decode GEMVs read 15–17 / 13–16 / 10–12 GB/s with T0 and 28 / 27–28 / 18 with T1, where a
   two-thread read loop made 30–34; T2 measured like T1, NTA like T0. An experiment may override it with -D. */
#ifndef EK_PREFETCH_HINT
#define EK_PREFETCH_HINT _MM_HINT_T1
#endif

#endif /* EK_X86_PREFETCH_H */
