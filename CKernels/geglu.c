/*
 * geglu.c — the GELU-gated feed-forward activation (Gemma's): h = gelu(g)·u,
 * GELU in its tanh form 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
 *
 * As llama.cpp computes it on the CPU: g is rounded to fp16 and looked up in
 * a table of the 65,536 fp16 GELU values (each the fp32 formula rounded to
 * fp16); g ≤ −10 gives 0 and g ≥ 10 gives g itself. The table is a constant,
 * built once on first use.
 */
#include <math.h>
#include <pthread.h>
#include "ek_ops.h"
#include "ek_quant.h"

static uint16_t gelu_table[65536];
static pthread_once_t gelu_table_once = PTHREAD_ONCE_INIT;

float ek_gelu_tanh(float x) {
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f, coefficient = 0.044715f;
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + coefficient * x * x)));
}

static void build_gelu_table(void) {
    for (uint32_t bits = 0; bits < 65536; bits++)
        gelu_table[bits] = ek_fp32_to_fp16(ek_gelu_tanh(ek_fp16_to_fp32((uint16_t)bits)));
}

void ek_geglu(const float *g, const float *u, float *h, int64_t n) {
    pthread_once(&gelu_table_once, build_gelu_table);
    for (int64_t i = 0; i < n; i++) {
        float x = g[i];
        float gelu = x <= -10.0f ? 0.0f : x >= 10.0f ? x : ek_fp16_to_fp32(gelu_table[ek_fp32_to_fp16(x)]);
        h[i] = gelu * u[i];
    }
}
