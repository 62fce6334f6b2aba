/* Floor 3, policy: the GPU bytes the budget counts, per device. */
#include "runtime/residency.h"

/* DEV holds BYTES more (fewer) of class CLS on the GPU. `spare` measures its
 * room against the peak of what the classes that do not read it hold. */
void resident_add(struct runtime *rt, struct device_state *dev, int cls, uint64_t bytes)
{
    dev->resident_bytes += bytes;
    if (dev->resident_bytes > dev->resident_peak)
        dev->resident_peak = dev->resident_bytes;
    if (rt->program->classes[cls].memory == MEMORY_MOVABLE) {
        dev->movable_resident += bytes;
    } else if (dev->returning) {
        uint64_t fixed = dev->resident_bytes - dev->movable_resident;
        for (size_t c = 0; c < rt->program->class_count; c++) /* classes that come back */
            if (dev->return_mark[c] && fixed > dev->return_peak[c])
                dev->return_peak[c] = fixed;
    }
    if (rt->program->classes[cls].uses_spare) {
        dev->spare_held += bytes;
        dev->spare_judged_by = dev->others_peak;
    } else if (dev->resident_bytes - dev->spare_held > dev->others_peak)
        dev->others_peak = dev->resident_bytes - dev->spare_held;
}

void resident_sub(struct runtime *rt, struct device_state *dev, int cls, uint64_t bytes)
{
    dev->resident_bytes -= bytes;
    if (rt->program->classes[cls].memory == MEMORY_MOVABLE)
        dev->movable_resident -= bytes;
    if (rt->program->classes[cls].uses_spare)
        dev->spare_held -= bytes;
}

