/* The one table of GPU datasheet figures: dense (no sparsity) peak
 * TFLOPS per dtype, memory and bandwidth, each row with its source. Read
 * by the training planner (src/plan/) and the trace analysis (src/trace/:
 * MFU against the device of a trace). */
#ifndef MP_GPU_H
#define MP_GPU_H

#include <stdbool.h>

/* Peak columns. fp32 is the CUDA-core rate (what PyTorch's fp32 matmul
 * gets with TF32 off, its default for matmul); tf32, fp16, bf16 and fp8
 * are tensor-core rates with fp32 accumulation; 0 = the datasheet gives
 * none (the GPU lacks the dtype). */
enum { MP_GPU_FP32, MP_GPU_TF32, MP_GPU_FP16, MP_GPU_BF16, MP_GPU_FP8, MP_GPU_FP64, MP_GPU_DT_COUNT };

typedef struct mp_gpu {
    const char *id;         /* --gpu name: "h100-sxm" */
    const char *label;      /* "H100 SXM" */
    const char *match;      /* substring of the device name a trace reports */
    double tflops[MP_GPU_DT_COUNT];
    double mem_gb;          /* device memory, GB (10^9 bytes) */
    double bandwidth_gbs;   /* memory bandwidth, GB/s */
    double link_gbs;        /* GPU-to-GPU bandwidth per direction (NVLink, else PCIe), GB/s */
    const char *source;     /* the datasheet every figure of the row comes from */
} mp_gpu;

/* Names of the peak columns: "fp32", "tf32", "fp16", "bf16", "fp8", "fp64". */
extern const char *const mp_gpu_dtype_names[MP_GPU_DT_COUNT];

int mp_gpu_count(void);
const mp_gpu *mp_gpu_at(int i);
/* By --gpu id (case-insensitive), else as mp_gpu_match reads a device
 * name, as given and in capitals ("NVIDIA H100 80GB HBM3", "h100": H100
 * SXM; "a100": A100 80GB); NULL when unknown. */
const mp_gpu *mp_gpu_find(const char *id);
/* By a device name as a trace reports it ("NVIDIA H100 80GB HBM3"): the
 * first row whose `match` occurs in it not followed by a digit or capital
 * ("L4" is not "L40S"); NULL when none. */
const mp_gpu *mp_gpu_match(const char *device);

#endif
