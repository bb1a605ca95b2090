// A kernel that uses what everyday code uses: half precision, cooperative groups, Thrust.
#include <cstdio>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <thrust/device_vector.h>
#include <thrust/reduce.h>
namespace cg = cooperative_groups;

__global__ void saxpy_half(int n, float a, const __half* x, float* y) {
    cg::thread_block block = cg::this_thread_block();
    int i = block.group_index().x * block.size() + block.thread_rank();
    if (i < n) y[i] = a * __half2float(x[i]) + y[i];
}

int main() {
    const int n = 1 << 20;
    thrust::device_vector<__half> x(n, __float2half(1.0f));
    thrust::device_vector<float> y(n, 2.0f);
    saxpy_half<<<(n + 255) / 256, 256>>>(n, 3.0f, thrust::raw_pointer_cast(x.data()),
                                         thrust::raw_pointer_cast(y.data()));
    cudaError_t status = cudaDeviceSynchronize();
    if (status != cudaSuccess) { printf("kernel failed: %s\n", cudaGetErrorString(status)); return 2; }
    double sum = thrust::reduce(y.begin(), y.end(), 0.0);
    int device; cudaGetDevice(&device); cudaDeviceProp prop; cudaGetDeviceProperties(&prop, device);
    printf("ran on %s (sm_%d%d): sum %.0f, expected %.0f\n", prop.name, prop.major, prop.minor, sum, 5.0 * n);
    return sum == 5.0 * n ? 0 : 1;
}
