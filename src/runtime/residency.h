/* Floor 3, policy. What the budget counts: the GPU bytes the runtime holds
 * per device (device_state.resident_bytes), and for `spare` what the classes
 * that read it hold and the peak of the rest. Placement and the stream both
 * change it, through these two functions only. */
#ifndef UMPOL_RUNTIME_RESIDENCY_H
#define UMPOL_RUNTIME_RESIDENCY_H

#include <stdint.h>

#include "runtime/state.h"

void resident_add(struct runtime *rt, struct device_state *dev, int cls, uint64_t bytes);
void resident_sub(struct runtime *rt, struct device_state *dev, int cls, uint64_t bytes);

#endif
