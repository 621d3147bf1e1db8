/* The kernel formulas of hkern, as functions of the scaled distance s (see _kernels.pxd):
 *   s = ||x - y||_2^2 / sigma^2  (Gaussian, IMQ, Matern)     s = ||x - y||_1 / sigma  (Laplace)
 *
 * Each kernel is written once, as hk_<name>(s).  The same inline function serves the scalar path
 * (kernel_pair) and the vectorised tile map (hk_map_<name>), so both give identical bits.
 *
 * Why a hand-written exp: glibc's exp is scalar without -ffast-math (which we refuse: it would set
 * flush-to-zero process-wide when this library loads), and the elementwise map is the bottleneck of
 * kernel evaluation.  hk_exp_core is a branch-free Cody-Waite reduction plus a degree-11
 * polynomial (a Chebyshev fit, error 1.6e-17 relative on |r| <= ln2/2), accurate to about 1 ulp
 * (at most 1 ulp, 6% of values 1 ulp off, on 220 000 points of [-708, 0] against mpmath), that
 * the compiler vectorises.  The polynomial is written with fma(): correctly rounded wherever it runs, so the
 * scalar path (libm's fma, hardware on x86-64) and the vector clones (x86-64-v3/v4 FMA
 * instructions) give the same bits, in half the operations of separate multiplies and adds.  It is valid for x in [HK_EXP_LO, 709]; below HK_EXP_LO the result would be
 * subnormal, so the maps leave those (rare) entries for a scalar pass through libm's exp.
 */
#ifndef HKERN_KERNEL_DEFS_H
#define HKERN_KERNEL_DEFS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HK_EXP_LO (-708.0)

static inline double hk_exp_core(double x)
{
    const double log2e = 1.4426950408889634;
    const double shift = 6755399441055744.0;            /* 1.5 * 2^52: rounds to an integer */
    const double ln2_hi = 6.93147180369123816490e-01;   /* 32 significant bits: k*ln2_hi exact */
    const double ln2_lo = 1.90821492927058770002e-10;
    double kd = x * log2e + shift;
    uint64_t bits, scale_bits;
    double r, p, scale;
    memcpy(&bits, &kd, sizeof bits);                     /* low bits hold k in two's complement */
    kd -= shift;
    r = (x - kd * ln2_hi) - kd * ln2_lo;
    /* exp(r) = 1 + r (1 + r q(r)): q of degree 9 is the Chebyshev fit of (exp(r) - 1 - r) / r^2
     * on |r| <= 0.354 (error 1.3e-16 in q, 1.6e-17 relative in exp): two FMAs fewer than the
     * degree-13 Taylor polynomial for the same accuracy. */
    p = 0x1.af413d124bb31p-26;
    p = fma(p, r, 0x1.28987da595abep-22);
    p = fma(p, r, 0x1.71de0a00ab9b9p-19);
    p = fma(p, r, 0x1.a019b3126ea28p-16);
    p = fma(p, r, 0x1.a01a01a8bb76ep-13);
    p = fma(p, r, 0x1.6c16c17a1de7ep-10);
    p = fma(p, r, 0x1.1111111110870p-7);
    p = fma(p, r, 0x1.5555555553947p-5);
    p = fma(p, r, 0x1.5555555555556p-3);
    p = fma(p, r, 0x1.0000000000001p-1);
    p = fma(p, r, 1.0);
    p = fma(p, r, 1.0);
    scale_bits = (bits + 1023u) << 52;                   /* 2^k: the shift drops the magic bits */
    memcpy(&scale, &scale_bits, sizeof scale);
    return p * scale;
}

/* exp for any x <= 709, matching hk_exp_core bit for bit where that is valid. */
static inline double hk_exp(double x)
{
    return x < HK_EXP_LO ? exp(x) : hk_exp_core(x);
}

/* p * exp(x) for the Matern prefactors p >= 1, matching p * hk_exp_core(x) bit for bit where
 * that is valid.  Below HK_EXP_LO, exp(x) is subnormal while p * exp(x) can still be a normal
 * number (matern52 down to x ~ -720): rounding exp(x) to a subnormal first lost up to ~1.5e-11
 * of relative accuracy there.  So exp is evaluated 64 binades higher and 2^-64 applied last, and
 * the result is rounded into the subnormal range (if at all) only once. */
static inline double hk_exp_times(double p, double x)
{
    if (x >= HK_EXP_LO)
        return p * hk_exp_core(x);
    if (x < -1000.0)        /* p e^x < 1e-420 for the Matern p; also p = inf at s = inf */
        return 0.0;
    return (p * exp(x + 64.0 * 0.69314718055994530942)) * 0x1p-64;
}

/* ---- single precision (the float32 engine) ----
 * hk_expf_core mirrors hk_exp_core in float: the same Cody-Waite reduction with ln2 split so that
 * k * ln2_hi is exact for |k| < 2^8 (ln2_hi has 10 significant bits), and exp(r) = 1 + r (1 + r
 * q(r)) with q of degree 4 (a weighted least-squares fit of (exp(r) - 1 - r) / r^2 on
 * |r| <= 0.3466; 3.8e-9 relative in exp with the coefficients rounded to float, against float's
 * half-ulp of 6e-8).  Written with fmaf() for the same reason as above: the scalar path and the
 * vector clones give the same bits; the x86-64-v3 clone runs it on 8 floats per instruction
 * (16 with AVX-512) where the double one runs 4 (8).  Valid for x in [HK_EXPF_LO, 88]: at
 * x >= -87 the result, at least exp(-87) = 1.4 * FLT_MIN, is a normal float and 2^k (k >= -126)
 * is too.  Below, the maps leave the entry for the scalar fix-up, which evaluates the double
 * formula and rounds it once (subnormal floats included). */
#define HK_EXPF_LO (-87.0f)

static inline float hk_expf_core(float x)
{
    const float log2e = 1.44269504088896341f;
    const float shift = 12582912.0f;                    /* 1.5 * 2^23: rounds to an integer */
    const float ln2_hi = 0.693359375f;                  /* 10 significant bits: k*ln2_hi exact */
    const float ln2_lo = -2.12194440e-4f;
    float kf = x * log2e + shift;
    uint32_t bits, scale_bits;
    float r, p, scale;
    memcpy(&bits, &kf, sizeof bits);                     /* low bits hold k in two's complement */
    kf -= shift;
    r = (x - kf * ln2_hi) - kf * ln2_lo;
    p = 0x1.687c02p-10f;
    p = fmaf(p, r, 0x1.123ba0p-7f);
    p = fmaf(p, r, 0x1.555b58p-5f);
    p = fmaf(p, r, 0x1.55548ep-3f);
    p = fmaf(p, r, 0x1.fffff8p-2f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    scale_bits = (bits + 127u) << 23;                    /* 2^k: the shift drops the magic bits */
    memcpy(&scale, &scale_bits, sizeof scale);
    return p * scale;
}

/* sqrt of the argument's own type (the templated maps below serve float and double). */
#define hk_sqrt(x) _Generic((x), float: sqrtf, default: sqrt)(x)

/* ---- the kernels (scalar, any s >= 0) ---- */
static inline double hk_gaussian(double s) { return hk_exp(-0.5 * s); }
static inline double hk_laplace(double s) { return hk_exp(-s); }
/* IMQ needs no exp: one formula for both precisions (float constants are exact in double). */
#define HK_IMQ(s) (1.0f / hk_sqrt(1.0f + (s)))
static inline double hk_imq(double s) { return HK_IMQ(s); }
static inline double hk_matern12(double s) { return hk_exp(-sqrt(s)); }
static inline double hk_matern32(double s)
{
    double a = sqrt(3.0 * s);
    return hk_exp_times(1.0 + a, -a);
}
static inline double hk_matern52(double s)
{
    double a = sqrt(5.0 * s);
    return hk_exp_times(1.0 + a + a * a / 3.0, -a);
}

/* ---- vectorised in-place maps v[j] <- k(v[j]) ----
 * The main loop is branch-free.  An entry whose exp argument is below HK_EXP_LO keeps its s
 * value, which is then at least 708 (Laplace; larger for the others), while every kernel value
 * lies in [0, 1 + a few ulp]: the fix-up pass finds exactly those entries by v[j] > 2 and
 * evaluates them with the scalar kernel.
 * target_clones builds x86-64-v4 (AVX-512) and x86-64-v3 (AVX2, FMA) versions beside the
 * baseline one; the loader picks one.  The fix-up scan runs only when the main loop counted an
 * entry for it (a scalar scan of every entry cost a third of the map's time). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HK_CLONES
#endif

/* The maps below are written once as templates over the element type T (double, and float for
 * the single-precision engine, names suffixed _f32).  Their constants are float literals, exact
 * in both types, so an expression means in double exactly what it meant when it was written
 * for double alone (the float64 results are bitwise those of the double-only code), and in
 * float it stays in float (a double literal would promote it).
 *
 * row[j] <- (xi + ysq[j] + row[j]) * inv_s2, the scaled squared distance from a row of
 * -2 x.Y^T, or -1 where cancellation has eaten its relative accuracy (at most `refine` of
 * xi + ysq[j]; a zero distance is always marked).  Returns how many were marked, for an exact
 * recomputation from the differences.  Vectorised (one version per instruction set). */
#define HK_DEFINE_SCALE_DISTANCES(SUFFIX, T)                                               \
    HK_CLONES static ptrdiff_t hk_scale_distances##SUFFIX(T *row, ptrdiff_t n, T xi,      \
                                                          const T *ysq, T inv_s2, T refine) \
    {                                                                                      \
        ptrdiff_t j;                                                                       \
        int n_marked = 0;   /* n < 2^31 (an int dimension); a 32-bit count vectorises in    \
                             * the float lanes' width (a 64-bit one took 4 widenings a step) */ \
        for (j = 0; j < n; j++) {                                                          \
            T norms = xi + ysq[j];                                                         \
            T sq = norms + row[j];                                                         \
            int lost = sq <= refine * norms;                                               \
            n_marked += lost;                                                              \
            row[j] = lost ? (T)-1 : sq * inv_s2;                                           \
        }                                                                                  \
        return n_marked;                                                                   \
    }

HK_DEFINE_SCALE_DISTANCES(, double)
HK_DEFINE_SCALE_DISTANCES(_f32, float)

/* v[j] <- k(v[j]) for a kernel exp(ARG) * FACTOR of s = v[j], x = ARG, in element type T with
 * the exponential EXP_CORE valid from LO.  Entries below LO keep s and are finished by FIXUP:
 * the double formula hk_NAME rounded to T once (0 below ZERO, where that rounds to 0). */
#define HK_DEFINE_EXP_MAP_T(NAME, SUFFIX, T, EXP_CORE, LO, ZERO, ARG, FACTOR, FIXUP)      \
    HK_CLONES static void hk_map_##NAME##SUFFIX(T *v, ptrdiff_t n)                        \
    {                                                                                      \
        ptrdiff_t j;                                                                       \
        int n_low = 0;      /* 32-bit, as n_marked above */                                \
        for (j = 0; j < n; j++) {                                                          \
            T s = v[j];                                                                    \
            T x = (ARG);                                                                   \
            T e = (FACTOR) * EXP_CORE(x < LO ? LO : x);                                    \
            n_low += x < LO;                                                               \
            v[j] = x < LO ? s : e;                                                         \
        }                                                                                  \
        if (n_low)  /* the fix-up only when some entry needs it */                         \
            FIXUP(NAME, T, ARG, FACTOR, ZERO)                                              \
    }

/* The fix-up in double: the scalar kernel, which reaches the subnormal doubles through libm. */
#define HK_FIXUP_SCALAR(NAME, T, ARG, FACTOR, ZERO)                                        \
    for (j = 0; j < n; j++)                                                                \
        if (v[j] > 2)                                                                      \
            v[j] = (T)hk_##NAME(v[j]);

/* The fix-up in float: the same double formula.  An entry left to it is a float subnormal or
 * 0, which the double exponential core reaches without a fix-up of its own: from
 * x >= HK_EXP_LO it is hk_exp_core (as hk_exp and hk_exp_times are there), and below it every
 * kernel's value rounds to the float 0 (p e^x < 1e-300 for the Matern prefactors), so each
 * entry gets the bits of (T)hk_NAME(s).  With short lengthscales most entries underflow float,
 * and a scalar call for each took 4.8 ns an entry against 0.8 for the map (d = 9, half the
 * entries below HK_EXPF_LO).  So a vector pass sets the entries below ZERO to 0, and the rest
 * (the band from ZERO to LO) are gathered a block at a time and evaluated by a vector pass in
 * double. */
/* (float)y for 0 <= y <= FLT_MAX, as its bit pattern (held exactly in a double), with no
 * subnormal float ever made by the FPU: a subnormal result costs a microcode assist (about
 * 13 ns an entry here, where the map costs 0.6), so those bits are built from integers, by
 * rounding y in units of the least subnormal 2^-149 to the nearest integer, ties to even,
 * which is the encoding of the subnormal float (and of FLT_MIN, 2^23 units, when it rounds
 * up).  Vectorises. */
static inline double hk_float_bits(double y)
{
    double normal = y < 0x1p-126 ? 0x1p-126 : y;
    float f = (float)normal;
    uint32_t bits;
    double units = y * 0x1p149;                           /* exact: a power of two */
    units = (units + 0x1p52) - 0x1p52;                    /* nearest integer, ties to even */
    memcpy(&bits, &f, sizeof bits);
    return y < 0x1p-126 ? units : (double)bits;
}

static inline float hk_bits_float(double bits_as_double)
{
    uint32_t bits = (uint32_t)(int32_t)bits_as_double;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#define HK_FIXUP_BLOCK 256
#define HK_FIXUP_VECTOR(NAME, T, ARG, FACTOR, ZERO)                                        \
    {                                                                                      \
        int n_band = 0;                                                                    \
        for (j = 0; j < n; j++) {   /* an entry left for the fix-up holds s > 2 */         \
            T s = v[j];                                                                    \
            T x = (ARG);                                                                   \
            int zero = (s > 2) & (x < ZERO);                                               \
            n_band += (s > 2) & !(x < ZERO);                                               \
            v[j] = zero ? (T)0 : s;                                                        \
        }                                                                                  \
        for (ptrdiff_t j0 = 0; n_band && j0 < n; j0 += HK_FIXUP_BLOCK) {                   \
            ptrdiff_t at[HK_FIXUP_BLOCK], end = j0 + HK_FIXUP_BLOCK < n ? j0 + HK_FIXUP_BLOCK : n; \
            double e[HK_FIXUP_BLOCK];                                                      \
            int m = 0, k;                                                                  \
            for (j = j0; j < end; j++) {    /* branch-free: write, advance if it is one */ \
                at[m] = j;                                                                 \
                m += v[j] > 2;                                                             \
            }                                                                              \
            for (k = 0; k < m; k++)                                                        \
                e[k] = v[at[k]];                                                           \
            for (k = 0; k < m; k++) {                                                      \
                double s = e[k];                                                           \
                double x = (ARG);                                                          \
                double y = (FACTOR) * hk_exp_core(x < HK_EXP_LO ? HK_EXP_LO : x);          \
                e[k] = x < HK_EXP_LO ? 0.0 : y;                                            \
            }                                                                              \
            for (k = 0; k < m; k++)                                                        \
                e[k] = hk_float_bits(e[k]);                                                \
            for (k = 0; k < m; k++)                                                        \
                v[at[k]] = hk_bits_float(e[k]);                                            \
            n_band -= m;                                                                   \
        }                                                                                  \
    }

/* One definition per kernel, instantiated in both precisions.  ZERO32: below it the kernel
 * rounds to the float 0 (its value is under half the least subnormal, 2^-150 = 7.0e-46):
 * e^-104 = 6.8e-46 for a plain exponential, and (1 + a + a^2/3) e^-a at a = 115 is 5e-47 for
 * the Matern prefactors.  The double map's scalar fix-up has no such bound. */
#define HK_DEFINE_EXP_MAP(NAME, ARG, FACTOR, ZERO32)                                       \
    HK_DEFINE_EXP_MAP_T(NAME, , double, hk_exp_core, HK_EXP_LO, 0, ARG, FACTOR,            \
                        HK_FIXUP_SCALAR)                                                   \
    HK_DEFINE_EXP_MAP_T(NAME, _f32, float, hk_expf_core, HK_EXPF_LO, ZERO32, ARG, FACTOR,  \
                        HK_FIXUP_VECTOR)

HK_DEFINE_EXP_MAP(gaussian, -0.5f * s, 1.0f, -104.0f)
HK_DEFINE_EXP_MAP(laplace, -s, 1.0f, -104.0f)
HK_DEFINE_EXP_MAP(matern12, -hk_sqrt(s), 1.0f, -104.0f)
HK_DEFINE_EXP_MAP(matern32, -hk_sqrt(3.0f * s), (1.0f - x), -115.0f)
HK_DEFINE_EXP_MAP(matern52, -hk_sqrt(5.0f * s), (1.0f - x + x * x / 3.0f), -115.0f)

#define HK_DEFINE_IMQ_MAP(SUFFIX, T)                                                       \
    HK_CLONES static void hk_map_imq##SUFFIX(T *v, ptrdiff_t n)                            \
    {                                                                                      \
        ptrdiff_t j;                                                                       \
        for (j = 0; j < n; j++)                                                            \
            v[j] = HK_IMQ(v[j]);                                                           \
    }

HK_DEFINE_IMQ_MAP(, double)
HK_DEFINE_IMQ_MAP(_f32, float)

/* ---- the Gaussian K u in single precision, fused ----
 * out[i] += sum_j k(x_i, z_j) u[j] for rows i < m over one tile of HK_FUSED_COLS columns, with
 * the exponent a_ij = c (||x_i||^2 + ||z_j||^2 - 2 x_i.z_j), c = -1 / (2 sigma^2) rounded to
 * float, accumulated in registers: it starts at c ||x_i||^2 + c ||z_j||^2 (czsq) and adds
 * (-2c x_ik) z_jk for k < d, HK_FUSED_BLOCK columns at a time, the tile stored transposed (Zt,
 * d x HK_FUSED_COLS).  So no distance, kernel value or product is written out and read back;
 * the unfused tile went through sgemm's output, a scaling pass, the map and sgemv, at 1.5 times
 * the limit of exp plus 2d flops.
 * Sums: row i's terms go to 16 running float sums lanes[16 i + l] by column modulo 16 (a fixed
 * order, the same in every clone), kept by the caller across tiles; with `flush` they are added
 * to out[i] in double and zeroed.  The caller flushes at least every HK_FUSED_FLUSH tiles, so
 * no float sum runs over more than 16 HK_FUSED_FLUSH = 256 terms (SUM_CHUNK in _kernels.pyx).
 * Entries whose exponent is below HK_EXPF_LO count 0: their float value is below FLT_MIN
 * (1.2e-38), where the unfused path gives correctly rounded subnormals.
 * Cancellation: an entry with a_ij >= refine (c ||x_i||^2 + c ||z_j||^2), i.e. a squared
 * distance within REFINE_FRACTION_F32 of the norms as the unfused path marks it, may have lost
 * its accuracy.  For a row with any, each such entry's float term is replaced by the exact
 * one, hk_gaussian(||x_i - z_j||^2 inv_s2) from the differences in double, the difference
 * added to out[i] at once.  (A test against the tile's largest ||z||^2 instead
 * flagged most rows of protein's scaled data, whose norms reach 7000 against a median of 11,
 * and made K u twice as slow as the tile path.)  Padding columns carry czsq = -1e30, u = 0. */
#define HK_FUSED_COLS 256
#define HK_FUSED_BLOCK 128
/* One entry's term before the product with u: exp(a), or 0 below float's normal range. */
static inline float hk_expf_or_zero(float a)
{
    float e = hk_expf_core(a < HK_EXPF_LO ? HK_EXPF_LO : a);
    return a < HK_EXPF_LO ? 0.0f : e;
}

#define HK_FUSED_FLUSH 16
/* The row stride of a transposed tile: 16 elements past HK_FUSED_COLS, so that the d rows of a
 * column block do not all fall in the same few L1 sets (a double version of this loop, measured
 * and not kept, ran 2.2 times slower at d = 32 with a 2 KiB stride: the 32 rows of a block
 * shared two set groups, 16 lines a set for 8 ways). */
#define HK_FUSED_LD (HK_FUSED_COLS + 16)
/* The exponents of one row against one column block of a transposed tile, for the fused loops:
 * b[l] = c ||x||^2 + c ||z_l||^2 + sum_k (-2c x_k) z_lk by fmaf, in this order.  A macro, so
 * that each loop compiles as it was measured (the same bits and speed; sharing the rare exact
 * recomputation the same way, or as a function, cost K u a fifth, so each loop keeps its own). */
#define HK_FUSED_EXPONENTS(d, x, cxi, m2c, Zt, czsq, j0, b)                                 \
    do {                                                                                   \
        int k_, l_;                                                                        \
        float x0_ = (m2c) * (x)[0];                                                        \
        for (l_ = 0; l_ < HK_FUSED_BLOCK; l_++)                                            \
            (b)[l_] = fmaf(x0_, (Zt)[(j0) + l_], (cxi) + (czsq)[(j0) + l_]);               \
        for (k_ = 1; k_ < (d); k_++) {                                                     \
            const float *z_ = (Zt) + (ptrdiff_t)k_ * HK_FUSED_LD + (j0);                   \
            float xk_ = (m2c) * (x)[k_];                                                   \
            for (l_ = 0; l_ < HK_FUSED_BLOCK; l_++)                                        \
                (b)[l_] = fmaf(xk_, z_[l_], (b)[l_]);                                      \
        }                                                                                  \
    } while (0)
HK_CLONES static void hk_gaussian_times_f32(int m, int d, const float *X, const float *xsq,
                                            const float *Zt, const float *czsq,
                                            const float *u, float c, double inv_s2,
                                            float refine, float *lanes, int flush,
                                            double *out)
{
    float m2c = -2.0f * c;                               /* exact: a power of two */
    int i, j, j0, k, l;
    /* Column blocks outside, rows inside: a block of Zt (d x HK_FUSED_BLOCK) stays in L1 while
     * every row of the tile uses it.  With this order and stride, d = 16 and 32 took 0.17 and
     * 0.25 ns an entry (two threads) where a row at a time over the whole tile took 0.23 and
     * 0.38. */
    for (j0 = 0; j0 < HK_FUSED_COLS; j0 += HK_FUSED_BLOCK)
        for (i = 0; i < m; i++) {
            const float *x = X + (ptrdiff_t)i * d;
            float *kept = lanes + 16 * (ptrdiff_t)i, acc[16];
            float b[HK_FUSED_BLOCK] __attribute__((aligned(64)));   /* held in registers */
            float cxi = c * xsq[i];
            int lost[16] = {0}, any = 0;
            HK_FUSED_EXPONENTS(d, x, cxi, m2c, Zt, czsq, j0, b);
            for (l = 0; l < 16; l++)   /* a local copy: `lanes` might alias u for the compiler */
                acc[l] = kept[l];
            for (j = 0; j < HK_FUSED_BLOCK; j += 16)
                for (l = 0; l < 16; l++) {
                    float a = b[j + l];
                    lost[l] |= a >= refine * (cxi + czsq[j0 + j + l]);
                    acc[l] = fmaf(hk_expf_or_zero(a), u[j0 + j + l], acc[l]);
                }
            for (l = 0; l < 16; l++) {
                any |= lost[l];
                kept[l] = acc[l];
            }
            if (any) {     /* rare: near-duplicate points (always a point against itself) */
                double fix = 0.0;
                for (j = 0; j < HK_FUSED_BLOCK; j++) {
                    double sq = 0.0;
                    if (!(b[j] >= refine * (cxi + czsq[j0 + j])))
                        continue;
                    for (k = 0; k < d; k++) {
                        double diff = (double)x[k] - Zt[(ptrdiff_t)k * HK_FUSED_LD + j0 + j];
                        sq += diff * diff;
                    }
                    fix += (hk_gaussian(sq * inv_s2) - hk_expf_or_zero(b[j])) * u[j0 + j];
                }
                out[i] += fix;
            }
        }
    if (flush)
        for (i = 0; i < m; i++) {
            double sum = 0.0;
            for (l = 0; l < 16; l++) {
                sum += lanes[16 * (ptrdiff_t)i + l];
                lanes[16 * (ptrdiff_t)i + l] = 0.0f;
            }
            out[i] += sum;
        }
}

/* ---- the Gaussian kernel block in single precision, fused ----
 * out[i * ldo + j] = k(x_i, z_j) for rows i < m and the first `ncols` columns of one
 * transposed tile, the exponent formed in registers as in hk_gaussian_times_f32 and each
 * value written once.  kernel_normal_times' float block took sgemm's distances (an
 * inner dimension of d, with its panel copies), a scaling pass and the map: three passes
 * over the block, three quarters of FALKON's mixed-precision pass.  Cancelled entries (the
 * same test as hk_gaussian_times_f32's) are recomputed from the differences in double. */
HK_CLONES static void hk_gaussian_block_f32(int m, int d, const float *X, const float *xsq,
                                            const float *Zt, const float *czsq, int ncols,
                                            float c, double inv_s2, float refine, float *out,
                                            ptrdiff_t ldo)
{
    float m2c = -2.0f * c;                               /* exact: a power of two */
    int i, j, j0, k, l;
    for (j0 = 0; j0 < ncols; j0 += HK_FUSED_BLOCK)
        for (i = 0; i < m; i++) {
            const float *x = X + (ptrdiff_t)i * d;
            float *o = out + (ptrdiff_t)i * ldo + j0;
            float b[HK_FUSED_BLOCK] __attribute__((aligned(64)));   /* held in registers */
            float cxi = c * xsq[i];
            /* The cancellation test a >= refine (cxi + czsq_j) as one running maximum of
             * a - refine czsq_j a lane, compared with refine cxi once per row (a flag a lane
             * kept spilling to the stack). */
            float top[16], rcxi = refine * cxi, most = -HUGE_VALF;
            int width = ncols - j0 < HK_FUSED_BLOCK ? ncols - j0 : HK_FUSED_BLOCK;
            HK_FUSED_EXPONENTS(d, x, cxi, m2c, Zt, czsq, j0, b);
            for (l = 0; l < 16; l++)
                top[l] = -HUGE_VALF;
            if (width == HK_FUSED_BLOCK) {
                for (j = 0; j < HK_FUSED_BLOCK; j += 16)
                    for (l = 0; l < 16; l++) {
                        float a = b[j + l], lead = a - refine * czsq[j0 + j + l];
                        top[l] = lead > top[l] ? lead : top[l];
                        o[j + l] = hk_expf_or_zero(a);
                    }
            } else {
                for (j = 0; j < width; j++) {
                    float lead = b[j] - refine * czsq[j0 + j];
                    top[0] = lead > top[0] ? lead : top[0];
                    o[j] = hk_expf_or_zero(b[j]);
                }
            }
            for (l = 0; l < 16; l++)
                most = top[l] > most ? top[l] : most;
            /* The screen errs towards scanning (its sums round differently from the test). */
            if (most >= rcxi - 1e-5f * fabsf(rcxi) - 1e-30f)   /* rare: near-duplicate points */
                for (j = 0; j < width; j++) {
                    double sq = 0.0;
                    if (!(b[j] >= refine * (cxi + czsq[j0 + j])))
                        continue;
                    for (k = 0; k < d; k++) {
                        double diff = (double)x[k] - Zt[(ptrdiff_t)k * HK_FUSED_LD + j0 + j];
                        sq += diff * diff;
                    }
                    o[j] = (float)hk_gaussian(sq * inv_s2);
                }
        }
}

/* hk_kernel(kind, s) and hk_map<SUFFIX>(kind, v, n): kernel `kind`, numbered as KernelKind in
 * _kernels.pxd (0 Gaussian, 1 Laplace, 2 IMQ, 3 Matern 1/2, 4 Matern 3/2, 5 Matern 5/2), one
 * dispatch for the scalar path and one per precision for the map. */
static inline double hk_kernel(int kind, double s)
{
    switch (kind) {
    case 0: return hk_gaussian(s);
    case 1: return hk_laplace(s);
    case 2: return hk_imq(s);
    case 3: return hk_matern12(s);
    case 4: return hk_matern32(s);
    default: return hk_matern52(s);
    }
}

#define HK_DEFINE_MAP_DISPATCH(SUFFIX, T)                                                  \
    static inline void hk_map##SUFFIX(int kind, T *v, ptrdiff_t n)                        \
    {                                                                                      \
        switch (kind) {                                                                    \
        case 0: hk_map_gaussian##SUFFIX(v, n); break;                                      \
        case 1: hk_map_laplace##SUFFIX(v, n); break;                                       \
        case 2: hk_map_imq##SUFFIX(v, n); break;                                           \
        case 3: hk_map_matern12##SUFFIX(v, n); break;                                      \
        case 4: hk_map_matern32##SUFFIX(v, n); break;                                      \
        default: hk_map_matern52##SUFFIX(v, n); break;                                     \
        }                                                                                  \
    }

HK_DEFINE_MAP_DISPATCH(, double)
HK_DEFINE_MAP_DISPATCH(_f32, float)

#endif
