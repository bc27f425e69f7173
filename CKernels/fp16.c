/*
 * fp16.c — IEEE binary16 ⇄ binary32 in portable C, rounding to nearest even
 * exactly as the F16C instructions do, so the scalar oracle and the SIMD
 * kernels agree bit for bit.
 */
#include <string.h>
#include "ek_quant.h"

ek_fp16 ek_fp32_to_fp16(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint32_t sign = (bits >> 16) & 0x8000u;
    uint32_t exponent = (bits >> 23) & 0xffu;
    uint32_t mantissa = bits & 0x7fffffu;
    if (exponent == 0xffu) { /* infinity, or NaN made quiet */
        return (ek_fp16)(sign | 0x7c00u | (mantissa ? 0x200u | (mantissa >> 13) : 0u));
    }
    int32_t half_exponent = (int32_t)exponent - 127 + 15;
    if (half_exponent >= 31) return (ek_fp16)(sign | 0x7c00u); /* overflow: infinity */
    if (half_exponent <= 0) {                                   /* subnormal or zero */
        if (half_exponent < -10) return (ek_fp16)sign;
        mantissa |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - half_exponent);
        uint32_t half = mantissa >> shift;
        uint32_t rest = mantissa & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rest > halfway || (rest == halfway && (half & 1u))) half++;
        return (ek_fp16)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)half_exponent << 10) | (mantissa >> 13);
    uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half++; /* a carry may reach infinity: correct */
    return (ek_fp16)half;
}

float ek_fp16_to_fp32(ek_fp16 value) {
    uint32_t sign = ((uint32_t)value & 0x8000u) << 16;
    uint32_t exponent = ((uint32_t)value >> 10) & 0x1fu;
    uint32_t mantissa = (uint32_t)value & 0x3ffu;
    uint32_t bits;
    if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            uint32_t shifts = 0;
            while (!(mantissa & 0x400u)) {
                mantissa <<= 1;
                shifts++;
            }
            bits = sign | ((113u - shifts) << 23) | ((mantissa & 0x3ffu) << 13);
        }
    } else if (exponent == 31) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else {
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    }
    float result;
    memcpy(&result, &bits, sizeof result);
    return result;
}
