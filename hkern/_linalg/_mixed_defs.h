/* Inner loops of the mixed-precision triangular solve (trsm_left_rows_mixed in
 * hkern/_linalg/mixed.pyx): a float32 matrix row read in place and widened to double, every
 * product and sum in double.
 *
 * Built as x86-64-v4 (AVX-512), x86-64-v3 (AVX2) and baseline clones, as the kernel maps are
 * (hkern/kernels/_kernel_defs.h): at SSE2's two doubles a step the widening, not memory, set
 * the pace (10 GB/s against 33 GB/s for a float64 dtrsv of the same triangle).  The dot
 * product keeps 8 explicit lanes added in a fixed tree, and no FMA is contracted
 * (-ffp-contract=off), so every clone returns the same bits. */
#ifndef HK_MIXED_DEFS_H
#define HK_MIXED_DEFS_H
#include <stddef.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HK_MIXED_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HK_MIXED_CLONES
#endif

/* sum_q a[q] x[q * incx], a float32, x double. */
HK_MIXED_CLONES static double hk_dot_mixed(const float *a, const double *x, ptrdiff_t incx,
                                           ptrdiff_t n)
{
    double lanes[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    double s;
    ptrdiff_t q = 0;
    int l;
    if (incx == 1) {
        for (; q + 8 <= n; q += 8)
            for (l = 0; l < 8; l++)
                lanes[l] += (double)a[q + l] * x[q + l];
    } else {
        for (; q + 8 <= n; q += 8)
            for (l = 0; l < 8; l++)
                lanes[l] += (double)a[q + l] * x[(q + l) * incx];
    }
    s = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    for (; q < n; q++)
        s += (double)a[q] * x[q * incx];
    return s;
}

/* y[r * incy] -= a[r] * x for r < n, a float32. */
HK_MIXED_CLONES static void hk_axpy_mixed(const float *a, double x, double *y, ptrdiff_t incy,
                                          ptrdiff_t n)
{
    ptrdiff_t r;
    if (incy == 1) {
        for (r = 0; r < n; r++)
            y[r] -= (double)a[r] * x;
    } else {
        for (r = 0; r < n; r++)
            y[r * incy] -= (double)a[r] * x;
    }
}

#endif
