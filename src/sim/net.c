/*
 * Network delay model (see net.h): the ziggurat of G. Marsaglia and
 * W. W. Tsang, "The Ziggurat Method for Generating Random Variables",
 * J. Stat. Software 5(8), 2000, with 128 layers. The layer index and the
 * value come from different bits of one 64-bit draw (the original shares
 * them, a known flaw).
 */
#include <math.h>

#include "net.h"

#define ZIG_R 3.442619855899
#define ZIG_V 9.91256303526217e-3
#define M1 2147483648.0

void sim_net_init(sim_net *n, const sim_delay *d, uint64_t seed)
{
    n->d = *d;
    stg_rng_seed(&n->rng, seed);
    double dn = ZIG_R, tn = dn;
    double q = ZIG_V / exp(-0.5 * dn * dn);
    n->kn[0] = (uint32_t)((dn / q) * M1);
    n->kn[1] = 0;
    n->wn[0] = q / M1;
    n->wn[SIM_ZIG_LAYERS - 1] = dn / M1;
    n->fn[0] = 1.0;
    n->fn[SIM_ZIG_LAYERS - 1] = exp(-0.5 * dn * dn);
    for (int i = SIM_ZIG_LAYERS - 2; i >= 1; i--) {
        dn = sqrt(-2.0 * log(ZIG_V / dn + exp(-0.5 * dn * dn)));
        n->kn[i + 1] = (uint32_t)((dn / tn) * M1);
        tn = dn;
        n->fn[i] = exp(-0.5 * dn * dn);
        n->wn[i] = dn / M1;
    }
}

/* Uniform in (0, 1): never 0, so that log() is finite. */
static double uni(sim_net *n)
{
    return ((double)(stg_rng_next(&n->rng) >> 11) + 0.5) * 0x1.0p-53;
}

double sim_net__normal_tail(sim_net *n, int32_t hz, uint32_t iz)
{
    for (;;) {
        double x = hz * n->wn[iz];
        if (iz == 0) {
            /* the base strip: the tail beyond R */
            double y;
            do {
                x = -log(uni(n)) / ZIG_R;
                y = -log(uni(n));
            } while (y + y < x * x);
            return hz > 0 ? ZIG_R + x : -ZIG_R - x;
        }
        /* a wedge: accept under the density */
        if (n->fn[iz] + uni(n) * (n->fn[iz - 1] - n->fn[iz]) < exp(-0.5 * x * x))
            return x;
        uint64_t r = stg_rng_next(&n->rng);
        iz = (uint32_t)r & (SIM_ZIG_LAYERS - 1);
        hz = (int32_t)(uint32_t)(r >> 32);
        int64_t a = hz < 0 ? -(int64_t)hz : hz;
        if (a < (int64_t)n->kn[iz])
            return hz * n->wn[iz];
    }
}
