// Host emulation of the MFMA GEMM helper (hip_mfma.h): each lane of a wavefront is a host
// thread, and the matrix instruction is emulated from AMD's operand layout for
// v_mfma_f32_16x16x16{f16,bf16_1k} (CDNA2/CDNA3 ISA, "Matrix Fused Multiply Add"; AMD's
// matrix instruction calculator): A[i][k] is element k % 4 of lane i + 16 (k / 4),
// B[k][j] element k % 4 of lane j + 16 (k / 4), C/D[i][j] element i % 4 of lane
// j + 16 (i / 4). The lanes of a wavefront meet at a barrier in every emulated instruction,
// as they execute it together on the GPU. Prints one line per case: its name and the
// largest difference from a reference product (inputs are small integers: exact in fp16,
// bf16 and fp32 sums, so the expected difference is 0).
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#define __device__
#define __forceinline__ inline

struct Dim3 {
  int x = 0, y = 0, z = 0;
};
static thread_local Dim3 threadIdx;
static Dim3 blockDim;

typedef _Float16 tl_hip_f16x4 __attribute__((ext_vector_type(4)));
typedef short tl_hip_bf16x4 __attribute__((ext_vector_type(4)));
typedef float tl_hip_f32x4 __attribute__((ext_vector_type(4)));

class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    int generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation != generation_; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_, arrived_ = 0, generation_ = 0;
};

static Barrier* wave_barrier = nullptr;
static float slot_a[64][4], slot_b[64][4];

static float bf16_to_float(short bits) {
  uint32_t word = uint32_t(uint16_t(bits)) << 16;
  float out;
  std::memcpy(&out, &word, 4);
  return out;
}

static short float_to_bf16(float value) {  // exact for the small integers used here
  uint32_t word;
  std::memcpy(&word, &value, 4);
  return short(word >> 16);
}

static int lane_id() {
  return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 64;
}

static tl_hip_f32x4 emulate(const float a[4], const float b[4], tl_hip_f32x4 c) {
  const int lane = lane_id();
  for (int j = 0; j < 4; ++j) {
    slot_a[lane][j] = a[j];
    slot_b[lane][j] = b[j];
  }
  wave_barrier->wait();
  tl_hip_f32x4 d;
  for (int j = 0; j < 4; ++j) {
    const int i = 4 * (lane / 16) + j, n = lane % 16;
    float sum = c[j];
    for (int k = 0; k < 16; ++k) sum += slot_a[i + 16 * (k / 4)][k % 4] * slot_b[n + 16 * (k / 4)][k % 4];
    d[j] = sum;
  }
  wave_barrier->wait();  // every lane has read the slots before any lane writes the next ones
  return d;
}

static tl_hip_f32x4 emulate_f16(tl_hip_f16x4 a, tl_hip_f16x4 b, tl_hip_f32x4 c, int, int, int) {
  float fa[4], fb[4];
  for (int j = 0; j < 4; ++j) fa[j] = float(a[j]), fb[j] = float(b[j]);
  return emulate(fa, fb, c);
}

static tl_hip_f32x4 emulate_bf16(tl_hip_bf16x4 a, tl_hip_bf16x4 b, tl_hip_f32x4 c, int, int, int) {
  float fa[4], fb[4];
  for (int j = 0; j < 4; ++j) fa[j] = bf16_to_float(a[j]), fb[j] = bf16_to_float(b[j]);
  return emulate(fa, fb, c);
}

#define __builtin_amdgcn_mfma_f32_16x16x16f16 emulate_f16
#define __builtin_amdgcn_mfma_f32_16x16x16bf16_1k emulate_bf16
#include "hip_mfma.h"

template <int M, int N, int K, int Threads, bool TransA, bool TransB, bool Bf16, bool Clear>
static void run_case(const char* name, int pad) {
  // op(A) is M x K, op(B) is K x N; stored transposed when asked, rows padded by `pad`
  const int a_rows = TransA ? K : M, a_cols = TransA ? M : K, lda = a_cols + pad;
  const int b_rows = TransB ? N : K, b_cols = TransB ? K : N, ldb = b_cols + pad;
  const int ldc = N + pad;
  std::vector<float> a(a_rows * lda), b(b_rows * ldb), c(M * ldc), expected(M * ldc);
  unsigned seed = 12345u + M * 7 + N * 3 + K;
  auto next = [&] { seed = seed * 1103515245u + 12345u; return float(int((seed >> 16) % 7) - 3); };
  for (auto& v : a) v = next();
  for (auto& v : b) v = next();
  for (auto& v : c) v = next();
  for (int i = 0; i < M; ++i)
    for (int n = 0; n < N; ++n) {
      float sum = Clear ? 0.0f : c[i * ldc + n];
      for (int k = 0; k < K; ++k)
        sum += (TransA ? a[k * lda + i] : a[i * lda + k]) * (TransB ? b[n * ldb + k] : b[k * ldb + n]);
      expected[i * ldc + n] = sum;
    }
  std::vector<_Float16> a16(a.begin(), a.end()), b16(b.begin(), b.end());
  std::vector<short> abf(a.size()), bbf(b.size());
  for (size_t i = 0; i < a.size(); ++i) abf[i] = float_to_bf16(a[i]);
  for (size_t i = 0; i < b.size(); ++i) bbf[i] = float_to_bf16(b[i]);
  const void* a_ptr = Bf16 ? static_cast<const void*>(abf.data()) : static_cast<const void*>(a16.data());
  const void* b_ptr = Bf16 ? static_cast<const void*>(bbf.data()) : static_cast<const void*>(b16.data());
  blockDim = Dim3{Threads, 1, 1};
  for (int wave = 0; wave < Threads / 64; ++wave) {  // waves own disjoint C tiles: one at a time
    Barrier barrier(64);
    wave_barrier = &barrier;
    std::vector<std::thread> lanes;
    for (int lane = 0; lane < 64; ++lane)
      lanes.emplace_back([&, lane] {
        threadIdx = Dim3{wave * 64 + lane, 0, 0};
        tl_hip_mfma_gemm<M, N, K, Threads, TransA, TransB, Bf16, Clear>(a_ptr, lda, b_ptr, ldb, c.data(), ldc);
      });
    for (auto& t : lanes) t.join();
  }
  float worst = 0.0f;
  for (int i = 0; i < M; ++i)
    for (int n = 0; n < N; ++n) {
      float diff = c[i * ldc + n] - expected[i * ldc + n];
      worst = diff < 0 ? (-diff > worst ? -diff : worst) : (diff > worst ? diff : worst);
    }
  std::printf("%s %g\n", name, worst);
}

int main() {
  run_case<32, 32, 16, 64, false, false, false, false>("f16_nn_accumulate", 0);
  run_case<64, 48, 32, 128, true, false, false, true>("f16_tn_clear_padded", 8);
  run_case<32, 64, 32, 192, false, true, true, false>("bf16_nt_three_waves", 4);
  run_case<16, 16, 64, 64, true, true, true, true>("bf16_tt_long_k", 0);
  return 0;
}
