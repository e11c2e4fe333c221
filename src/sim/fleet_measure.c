/*
 * The fleet scenario's measures (fleet.h): Jain's fairness index and the
 * check of the server's bound on the sends. Pure; no state but the
 * caller's.
 */
#include <math.h>

#include "fleet.h"

double sim_jain(const double *x, int n)
{
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        s += x[i];
        s2 += x[i] * x[i];
    }
    if (n <= 0 || !(s2 > 0))
        return 1.0; /* nobody, or all equal at 0 */
    return s * s / ((double)n * s2);
}

void sim_bound_init(sim_bound *b, double rate, int64_t burst)
{
    b->T = (int64_t)ceil(1e9 / rate);
    b->tau = (burst > 0 ? burst - 1 : 0) * b->T;
    b->tat = INT64_MIN / 2;
    b->sends = b->excess = 0;
}

void sim_bound_send(sim_bound *b, int64_t t_ns)
{
    b->sends++;
    if (t_ns < b->tat - b->tau) {
        b->excess++;
        return;
    }
    b->tat = (b->tat > t_ns ? b->tat : t_ns) + b->T;
}
