// TurboQuant's Lloyd-Max codebooks (ops/kv_turbo.h) as constants the CPU and the GPU
// share, so both decode a code to the same float. They are the output of
// kv_turbo::derive_codebook (Lloyd's iteration in double, rounded to float); a unit
// test derives them again and checks every entry. The lists are macros so that the
// GPU's constant-memory tables (ops/cuda/kv_codec.cuh) are spelled from the same text.
#pragma once

// clang-format off
#define CORVID_TURBO_CENTROIDS_2 -0x1.80251ep+0f, -0x1.cf45a6p-2f, 0x1.cf45a6p-2f, 0x1.80251ep+0f
#define CORVID_TURBO_BOUNDS_2 -0x1.f3f686p-1f, 0x0p+0f, 0x1.f3f686p-1f
#define CORVID_TURBO_CENTROIDS_3 -0x1.0e848p+1f, -0x1.54d84cp+0f, -0x1.811bb4p-1f, -0x1.f45bcap-3f, 0x1.f45bcap-3f, 0x1.811bb4p-1f, 0x1.54d84cp+0f, 0x1.0e848p+1f
#define CORVID_TURBO_BOUNDS_3 -0x1.b8f0a6p+0f, -0x1.0ab312p+0f, -0x1.fe32a6p-2f, 0x0p+0f, 0x1.fe32a6p-2f, 0x1.0ab312p+0f, 0x1.b8f0a6p+0f
#define CORVID_TURBO_CENTROIDS_4 -0x1.53a3b4p+1f, -0x1.040644p+1f, -0x1.9966fp+0f, -0x1.3f5c9p+0f, -0x1.e0f718p-1f, -0x1.50494p-1f, -0x1.8e5ef2p-2f, -0x1.0801c4p-3f, 0x1.0801c4p-3f, 0x1.8e5ef2p-2f, 0x1.50494p-1f, 0x1.e0f718p-1f, 0x1.3f5c9p+0f, 0x1.9966fp+0f, 0x1.040644p+1f, 0x1.53a3b4p+1f
#define CORVID_TURBO_BOUNDS_4 -0x1.2bd4fcp+1f, -0x1.d0b9bcp+0f, -0x1.6c61cp+0f, -0x1.17ec0ep+0f, -0x1.98a02cp-1f, -0x1.0bbc5cp-1f, -0x1.092feap-2f, 0x0p+0f, 0x1.092feap-2f, 0x1.0bbc5cp-1f, 0x1.98a02cp-1f, 0x1.17ec0ep+0f, 0x1.6c61cp+0f, 0x1.d0b9bcp+0f, 0x1.2bd4fcp+1f
// clang-format on

namespace corvid::ops::kv_turbo {

// 4 levels: centroids ascending, then the cell boundaries between them.
inline constexpr float kCentroids2[4] = {CORVID_TURBO_CENTROIDS_2};
inline constexpr float kBounds2[3] = {CORVID_TURBO_BOUNDS_2};
inline constexpr double kDistortion2 = 0.11452584304211706;  // expected squared error, unit variance

// 8 levels: centroids ascending, then the cell boundaries between them.
inline constexpr float kCentroids3[8] = {CORVID_TURBO_CENTROIDS_3};
inline constexpr float kBounds3[7] = {CORVID_TURBO_BOUNDS_3};
inline constexpr double kDistortion3 = 0.033391139601607445;  // expected squared error, unit variance

// 16 levels: centroids ascending, then the cell boundaries between them.
inline constexpr float kCentroids4[16] = {CORVID_TURBO_CENTROIDS_4};
inline constexpr float kBounds4[15] = {CORVID_TURBO_BOUNDS_4};
inline constexpr double kDistortion4 = 0.0091328676248443666;  // expected squared error, unit variance

}  // namespace corvid::ops::kv_turbo
