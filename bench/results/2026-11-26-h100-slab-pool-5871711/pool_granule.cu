#include <cstdio>
#include <cuda_runtime.h>
int main() {
    cudaMemPool_t pool; cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned; props.location.type = cudaMemLocationTypeDevice; props.location.id = 0;
    cudaMemPoolCreate(&pool, &props);
    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    size_t sizes[] = {2u<<20, 4u<<20, 34u<<20, 64u<<20, 66u<<20, 130u<<20, 258u<<20, (1024u+2)<<20, 1500u<<20};
    void *p[16]; unsigned long long r, u;
    for (int i = 0; i < 9; i++) {
        cudaMallocFromPoolAsync(&p[i], sizes[i], pool, s);
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &r);
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &u);
        printf("alloc %8zu KiB: reserved %10llu KiB used %10llu KiB slack %llu KiB\n", sizes[i]>>10, r>>10, u>>10, (r-u)>>10);
    }
    for (int i = 0; i < 9; i += 2) cudaFreeAsync(p[i], s);
    cudaStreamSynchronize(s);
    cudaMemPoolTrimTo(pool, 0);
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &r);
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &u);
    printf("after freeing every other + trim: reserved %llu KiB used %llu KiB slack %llu KiB\n", r>>10, u>>10, (r-u)>>10);
    for (int i = 1; i < 9; i += 2) cudaFreeAsync(p[i], s);
    cudaStreamSynchronize(s); cudaMemPoolTrimTo(pool, 0);
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &r);
    printf("all freed + trim: reserved %llu KiB\n", r>>10);
    // does free+alloc bigger on same stream without sync reuse?
    size_t f0, t0; cudaMemGetInfo(&f0, &t0);
    cudaMallocFromPoolAsync(&p[0], 200u<<20, pool, s);
    cudaMemGetInfo(&f0, &t0);
    printf("card free after 200MiB: %zu MiB\n", f0>>20);
    return 0;
}
