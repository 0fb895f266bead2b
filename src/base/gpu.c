/* GPU datasheet figures (see gpu.h and docs/PLANNING.md "GPU table").
 * Dense rates: NVIDIA's datasheets print tensor-core rates with 2:4
 * sparsity and mark them "*"; every figure here is half that starred one.
 * Order matters for mp_gpu_match: more specific names first. */
#include "base/gpu.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"

const char *const mp_gpu_dtype_names[MP_GPU_DT_COUNT] = {"fp32", "tf32", "fp16", "bf16", "fp8", "fp64"};

#define DS_A100 "NVIDIA A100 Tensor Core GPU datasheet (2021), SXM column"
#define DS_H100 "NVIDIA H100 Tensor Core GPU datasheet (2023)"
#define DS_H200 "NVIDIA H200 Tensor Core GPU datasheet (2024), SXM column"
#define DS_B200 "NVIDIA HGX B200 datasheet (2024): 8-GPU totals / 8"
#define DS_L4 "NVIDIA L4 Tensor Core GPU datasheet (2023)"
#define DS_ADA "NVIDIA Ada Lovelace GPU architecture whitepaper v2.1, appendix A (GeForce RTX 4090)"

static const mp_gpu gpus[] = {
    /* id, label, match, {fp32, tf32, fp16, bf16, fp8, fp64}, GB, GB/s, link GB/s, source */
    {"a100-40g", "A100 40GB SXM", "A100-SXM4-40GB", {19.5, 156, 312, 312, 0, 9.7}, 40, 1555, 300,
     DS_A100 " (40GB: HBM2 1,555 GB/s; NVLink 600 GB/s both directions)"},
    {"a100-80g", "A100 80GB SXM", "A100", {19.5, 156, 312, 312, 0, 9.7}, 80, 2039, 300,
     DS_A100 " (80GB: HBM2e 2,039 GB/s; NVLink 600 GB/s both directions)"},
    {"h100-pcie", "H100 PCIe", "H100 PCIe", {51.2, 378, 756.5, 756.5, 1513, 25.6}, 80, 2000, 64,
     DS_H100 ", PCIe column (PCIe Gen5 128 GB/s both directions)"},
    {"h100-nvl", "H100 NVL", "H100 NVL", {60, 417.5, 835.5, 835.5, 1670.5, 30}, 94, 3900, 300,
     DS_H100 ", NVL column (NVLink bridge 600 GB/s both directions)"},
    {"gh200", "GH200", "GH200", {66.9, 494.7, 989.4, 989.4, 1978.9, 33.5}, 96, 4000, 450,
     "NVIDIA GH200 Grace Hopper Superchip datasheet (2023), 96GB HBM3 column"},
    {"h100-sxm", "H100 SXM", "H100", {66.9, 494.7, 989.4, 989.4, 1978.9, 33.5}, 80, 3350, 450,
     DS_H100 ", SXM column (NVLink 900 GB/s both directions)"},
    {"h200", "H200 SXM", "H200", {66.9, 494.7, 989.4, 989.4, 1978.9, 33.5}, 141, 4800, 450,
     DS_H200 " (NVLink 900 GB/s both directions)"},
    {"b200", "B200", "B200", {75, 1125, 2250, 2250, 4500, 37}, 180, 8000, 900,
     DS_B200 " (1,440 GB HBM3e, 64 TB/s, NVLink 1.8 TB/s per GPU both directions)"},
    {"l40s", "L40S", "L40S", {91.6, 183, 362.05, 362.05, 733, 0}, 48, 864, 32,
     "NVIDIA L40S GPU datasheet (2023) (PCIe Gen4 x16 64 GB/s both directions)"},
    {"l4", "L4", "L4", {30.3, 60, 121, 121, 242.5, 0}, 24, 300, 32,
     DS_L4 " (PCIe Gen4 x16 64 GB/s both directions)"},
    {"rtx4090", "GeForce RTX 4090", "RTX 4090", {82.6, 82.6, 165.2, 165.2, 330.3, 0}, 24, 1008, 32,
     DS_ADA " (tensor rates with fp32 accumulate; PCIe Gen4 x16)"},
    {"a10g", "A10G", "A10G", {31.2, 0, 70, 70, 0, 0}, 24, 600, 32,
     "Amazon EC2 G5 instance documentation (NVIDIA A10G)"},
    {"a10", "A10", "A10", {31.2, 62.5, 125, 125, 0, 0}, 24, 600, 32,
     "NVIDIA A10 Tensor Core GPU datasheet (2021)"},
    {"v100", "V100 SXM2", "V100", {15.7, 0, 125, 0, 0, 7.8}, 32, 900, 150,
     "NVIDIA V100 Tensor Core GPU datasheet (2020), SXM2 column (NVLink 300 GB/s both directions)"},
};

int mp_gpu_count(void) { return (int)MP_ARRAY_LEN(gpus); }

const mp_gpu *mp_gpu_at(int i) { return i >= 0 && i < mp_gpu_count() ? &gpus[i] : NULL; }

const mp_gpu *mp_gpu_find(const char *id) {
    if (!id) return NULL;
    for (size_t i = 0; i < MP_ARRAY_LEN(gpus); i++)
        if (strcasecmp(id, gpus[i].id) == 0) return &gpus[i];
    /* a device's name as PyTorch gives it ("NVIDIA H100 80GB HBM3") or
     * its short form, in any case ("h100": the SXM card, "a100": 80GB,
     * "h100 pcie") */
    for (size_t i = 0; i < MP_ARRAY_LEN(gpus); i++) {
        const char *at = strcasestr(id, gpus[i].match);
        if (!at) continue;
        char after = at[strlen(gpus[i].match)];
        if ((after >= '0' && after <= '9') || (after >= 'A' && after <= 'Z') || (after >= 'a' && after <= 'z'))
            continue;
        return &gpus[i];
    }
    return NULL;
}

const mp_gpu *mp_gpu_match(const char *device) {
    if (!device) return NULL;
    for (size_t i = 0; i < MP_ARRAY_LEN(gpus); i++) {
        const char *at = strstr(device, gpus[i].match);
        if (!at) continue;
        char after = at[strlen(gpus[i].match)];
        if ((after >= '0' && after <= '9') || (after >= 'A' && after <= 'Z')) continue;
        return &gpus[i];
    }
    return NULL;
}
