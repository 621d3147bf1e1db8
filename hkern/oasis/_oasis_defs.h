/* Fixed-order dot product for the oASIS row pass.
 *
 * u_j = C[j, :k] . q is the inner loop of every oASIS step.  A single accumulator is a serial
 * chain of dependent additions (latency bound, and the compiler may not reorder it); sixteen
 * independent accumulators combined in a fixed tree give the same bits on every call with the
 * same data -- whatever the thread, chunk or MPI rank -- and vectorise (AVX-512 / AVX2 clones).
 */
#ifndef HKERN_OASIS_DEFS_H
#define HKERN_OASIS_DEFS_H

#include <stddef.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HK_OASIS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HK_OASIS_CLONES
#endif

HK_OASIS_CLONES static double hk_dot8(const double *restrict x, const double *restrict y,
                                      ptrdiff_t k)
{
    /* Sixteen lanes = two AVX-512 accumulators: without FMA contraction each vector add waits
     * 3-4 cycles for the previous one, so one accumulator left the pass latency bound. */
    double a[16] = {0.0};
    ptrdiff_t t, k16 = k - k % 16;
    int l;
    for (t = 0; t < k16; t += 16)
        for (l = 0; l < 16; l++)
            a[l] += x[t + l] * y[t + l];
    for (t = k16; t < k; t++)
        a[t - k16] += x[t] * y[t];
    for (l = 0; l < 8; l++)
        a[l] += a[l + 8];
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

#endif
