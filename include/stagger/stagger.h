/*
 * libstagger: polite retries for rate-limited HTTP APIs.
 * The umbrella header; include this, or the individual headers.
 */
#ifndef STAGGER_H
#define STAGGER_H

#include "common.h"
#include "rng.h"
#include "backoff.h"
#include "hints.h"
#include "policy.h"
#include "bucket.h"
#include "adaptive.h"
#include "budget.h"
#include "breaker.h"
#include "concurrency.h"
#include "redact.h"
#include "quota.h"
#include "cost.h"
#include "priority.h"

#endif
