// How fast can an AVX2 core without VNNI multiply 8-bit integers, against its own fp32 FMA peak? One core, hot loops
// on registers (no memory traffic, no scales), the forms Ember's AVX2 kernels use, `make bench-int8-ceiling`:
//
//   fma          VFMADD231PS                                  8 multiply-adds an instruction (the sgemm ceiling)
//   sign trick   VPSIGNB, VPMADDUBSW, VPMADDWD, VPADDD         32 products: full signed bytes (Q8_0, IQ4 values);
//                |w| taken once per weight register, as the GEMMs do (it meets several activation rows)
//   seven-bit    VPMADDUBSW, VPMADDWD, VPADDD                  32 products: unsigned ≤ 127 weights (MiniLM int8)
//   nibbles      VPMADDUBSW ×4 summed in int16, one VPMADDWD   128 products: 4-bit weights (Q4_0, Q4_K, …)
//
// Every loop runs independent chains enough to cover latency; rounds alternate the loops and medians are printed,
// as multiply-adds per ns and as a multiple of the FMA loop's. A GEMM's ratio to sgemm cannot pass the loop's
// multiple divided by sgemm's share of the FMA peak — so this is the bound the "int8 GEMM ≥ 2.5× sgemm" goal meets
// on such a core (docs/KERNELS.md quotes the figures). Build: cc -O2 -mavx2 -mfma avx2_int8_ceiling.c
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ITERATIONS 20000000L
#define ROUNDS 7

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// An empty volatile asm that claims to change v: the work must be redone every iteration (no hoisting), at no cost.
#define OPAQUE(v) __asm__ volatile("" : "+x"(v))

static volatile int sink;

static __attribute__((noinline)) double fma_loop(void) {
    __m256 chain[10], x = _mm256_set1_ps(1.0001f), y = _mm256_set1_ps(0.9999f);
    for (int i = 0; i < 10; i++) chain[i] = _mm256_set1_ps((float)i);
    double t = seconds();
    for (long n = 0; n < ITERATIONS; n++) {
#pragma GCC unroll 10
        for (int i = 0; i < 10; i++) chain[i] = _mm256_fmadd_ps(chain[i], x, y);
    }
    t = seconds() - t;
    for (int i = 1; i < 10; i++) chain[0] = _mm256_add_ps(chain[0], chain[i]);
    sink = (int)_mm256_cvtss_f32(chain[0]);
    return ITERATIONS * 10.0 * 8 / t / 1e9;
}

// kind 0: sign trick, 1: seven-bit, 2: nibbles (inlined per constant kind, so no branch stays in the loop).
static inline __attribute__((always_inline)) double int8_loop(int kind) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[6], w[4], a[2], magnitude[4];
    for (int i = 0; i < 6; i++) acc[i] = _mm256_setzero_si256();
    for (int i = 0; i < 4; i++) w[i] = _mm256_set1_epi8((char)(kind == 2 ? i * 3 + 1 : i * 37 - 60));
    for (int i = 0; i < 4; i++) magnitude[i] = _mm256_abs_epi8(w[i]);
    for (int i = 0; i < 2; i++) a[i] = _mm256_set1_epi8((char)(i * 7 - 11));
    double t = seconds();
    for (long n = 0; n < ITERATIONS; n++) {
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++) {
            __m256i w0 = w[i & 3], a0 = a[i & 1];
            OPAQUE(w0);
            OPAQUE(a0);
            __m256i pairs;
            if (kind == 0) {
                __m256i m0 = magnitude[i & 3];
                OPAQUE(m0);
                pairs = _mm256_maddubs_epi16(m0, _mm256_sign_epi8(a0, w0));
            } else if (kind == 1) {
                pairs = _mm256_maddubs_epi16(w0, a0);
            } else {
                __m256i w1 = w[(i + 1) & 3], w2 = w[(i + 2) & 3], w3 = w[(i + 3) & 3], a1 = a[(i + 1) & 1];
                OPAQUE(w1);
                OPAQUE(w2);
                OPAQUE(w3);
                OPAQUE(a1);
                pairs = _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w0, a0), _mm256_maddubs_epi16(w1, a1)),
                                         _mm256_add_epi16(_mm256_maddubs_epi16(w2, a0), _mm256_maddubs_epi16(w3, a1)));
            }
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(pairs, ones));
        }
    }
    t = seconds() - t;
    for (int i = 1; i < 6; i++) acc[0] = _mm256_add_epi32(acc[0], acc[i]);
    sink = _mm256_extract_epi32(acc[0], 0);
    return ITERATIONS * 6.0 * (kind == 2 ? 128 : 32) / t / 1e9;
}

// One function each, so that each loop has the whole register file to itself.
static __attribute__((noinline)) double sign_trick_loop(void) { return int8_loop(0); }
static __attribute__((noinline)) double seven_bit_loop(void) { return int8_loop(1); }
static __attribute__((noinline)) double nibbles_loop(void) { return int8_loop(2); }

static int ascending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values) {
    qsort(values, ROUNDS, sizeof *values, ascending);
    return values[ROUNDS / 2];
}

int main(void) {
    static const char *names[3] = {"sign trick (8-bit signed)", "seven-bit (maddubs+maddwd)", "nibbles (4-bit, int16 sums)"};
    double fma[ROUNDS], rate[3][ROUNDS], multiple[3][ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        fma[r] = fma_loop();
        rate[0][r] = sign_trick_loop();
        rate[1][r] = seven_bit_loop();
        rate[2][r] = nibbles_loop();
        for (int k = 0; k < 3; k++) multiple[k][r] = rate[k][r] / fma[r];
    }
    printf("one core, AVX2 ymm, %d alternating rounds, medians\n", ROUNDS);
    printf("%-30s %6.1f multiply-adds/ns\n", "fma (fp32)", median(fma));
    for (int k = 0; k < 3; k++) {
        double per_ns = median(rate[k]);
        printf("%-30s %6.1f products/ns   %.2fx the FMA peak\n", names[k], per_ns, median(multiple[k]));
    }
    return 0;
}
