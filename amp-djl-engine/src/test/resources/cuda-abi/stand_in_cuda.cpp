// A stand-in for libtorch_cuda, libc10_cuda and libcudart with the same C++ and C signatures as
// PyTorch's CUDAGraph.h and CUDAStream.h declare (by value, as the real ones are compiled), so that
// CudaGraphAbiTest checks on a machine without CUDA that the JNA calls pass and receive what the
// C++ ABI expects. Each call appends what it received to a log. -DOLD_SIGNATURES: PyTorch 2.7's
// CUDAGraph() and capture_begin(pool, mode); otherwise CUDAGraph(bool) and a trailing bool.
#include <cstdint>
#include <string>
#include <utility>

enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0 };
typedef struct CUstream_st* cudaStream_t;

static std::string record;
static int capturing = 0;
static bool invalidated = false;

static void note(const std::string& what) { record += what + " "; }

namespace c10 {
using DeviceIndex = int8_t;
using CaptureId_t = unsigned long long;
using MempoolId_t = std::pair<CaptureId_t, CaptureId_t>;
struct Device {
  int8_t type;
  int8_t index;
};
namespace cuda {
class CUDAStream {
 public:
  CUDAStream(int8_t type, int8_t index, int64_t id) : device_{type, index}, id_(id) {}
  cudaStream_t stream() const;
 private:
  Device device_;
  int64_t id_;
  friend void setCurrentCUDAStream(CUDAStream stream);
};
static CUDAStream current(1, 0, 0);  // the default stream: id 0
CUDAStream getStreamFromPool(const bool high_priority, DeviceIndex device) {
  note("pool(" + std::to_string(high_priority) + "," + std::to_string(device) + ")");
  return CUDAStream(1, device, 77);
}
CUDAStream getCurrentCUDAStream(DeviceIndex device) { return current; }
void setCurrentCUDAStream(CUDAStream stream) {
  note("current(" + std::to_string(stream.device_.type) + "," +
       std::to_string(stream.device_.index) + "," + std::to_string(stream.id_) + ")");
  current = stream;
}
cudaStream_t CUDAStream::stream() const {
  return id_ == 0 ? nullptr : reinterpret_cast<cudaStream_t>(0x1000 + id_);
}
}  // namespace cuda
}  // namespace c10

namespace at {
namespace cuda {
struct CUDAGraph {
#ifdef OLD_SIGNATURES
  CUDAGraph();
  void capture_begin(c10::MempoolId_t pool, cudaStreamCaptureMode mode);
#else
  CUDAGraph(bool keep_graph);
  void capture_begin(c10::MempoolId_t pool, cudaStreamCaptureMode mode, bool dynamic_graph);
#endif
  ~CUDAGraph();
  void capture_end();
  void replay();
  int64_t magic;
};
#ifdef OLD_SIGNATURES
CUDAGraph::CUDAGraph() : magic(4242) { note("graph()"); }
void CUDAGraph::capture_begin(c10::MempoolId_t pool, cudaStreamCaptureMode mode) {
  note("begin(" + std::to_string(pool.first) + "," + std::to_string(pool.second) + "," +
       std::to_string(mode) + "," + std::to_string(magic) + ")");
  capturing = 1;
}
#else
CUDAGraph::CUDAGraph(bool keep_graph) : magic(4242) {
  note("graph(" + std::to_string(keep_graph) + ")");
}
void CUDAGraph::capture_begin(c10::MempoolId_t pool, cudaStreamCaptureMode mode, bool dynamic_graph) {
  note("begin(" + std::to_string(pool.first) + "," + std::to_string(pool.second) + "," +
       std::to_string(mode) + "," + std::to_string(dynamic_graph) + "," + std::to_string(magic) +
       ")");
  capturing = 1;
}
#endif
CUDAGraph::~CUDAGraph() { note("~graph(" + std::to_string(magic) + ")"); }
void CUDAGraph::capture_end() {
  note("end(" + std::to_string(magic) + ")");
  capturing = 0;
}
void CUDAGraph::replay() { note("replay(" + std::to_string(magic) + ")"); }
}  // namespace cuda
}  // namespace at

// PyTorch's CUDAGeneratorImpl.h: the two members are virtual overrides there; their exported
// definitions are called directly, with the generator as this, so plain members stand in.
namespace at {
struct CUDAGeneratorImpl {
  uint64_t get_offset() const;
  void set_offset(uint64_t offset);
  int64_t magic;
  uint64_t offset;
};
struct Generator {
  CUDAGeneratorImpl* impl_;  // c10::intrusive_ptr<c10::GeneratorImpl>: one pointer
};
static CUDAGeneratorImpl default_generator{6161, 8};
static Generator default_generator_handle{&default_generator};
uint64_t CUDAGeneratorImpl::get_offset() const {
  note("offset(" + std::to_string(magic) + ")");
  return offset;
}
void CUDAGeneratorImpl::set_offset(uint64_t value) {
  note("set_offset(" + std::to_string(magic) + "," + std::to_string(value) + ")");
  offset = value;
}
namespace cuda {
namespace detail {
const Generator& getDefaultCUDAGenerator(c10::DeviceIndex device_index) {
  note("generator(" + std::to_string(device_index) + ")");
  return default_generator_handle;
}
}  // namespace detail
}  // namespace cuda
}  // namespace at

extern "C" {
void stand_in_draw(uint64_t increment) { at::default_generator.offset += increment; }
uint64_t stand_in_offset() { return at::default_generator.offset; }
int cudaDeviceSynchronize() {
  note("sync");
  return 0;
}
int cudaStreamIsCapturing(cudaStream_t stream, int* status) {
  note("status(" + std::to_string(reinterpret_cast<intptr_t>(stream)) + ")");
  *status = invalidated ? 2 : capturing;
  return 0;
}
int cudaStreamEndCapture(cudaStream_t stream, void** graph) {
  note("abort");
  *graph = nullptr;
  capturing = 0;
  return 0;
}
int cudaGraphDestroy(void* graph) { return 0; }
int cudaEventCreateWithFlags(void** event, unsigned int flags) {
  note("event(" + std::to_string(flags) + ")");
  *event = reinterpret_cast<void*>(5151);
  return 0;
}
int cudaEventRecord(void* event, cudaStream_t stream) {
  note("record(" + std::to_string(reinterpret_cast<intptr_t>(event)) + "," +
       std::to_string(reinterpret_cast<intptr_t>(stream)) + ")");
  return 0;
}
int cudaStreamWaitEvent(cudaStream_t stream, void* event, unsigned int flags) {
  note("wait(" + std::to_string(reinterpret_cast<intptr_t>(stream)) + "," +
       std::to_string(reinterpret_cast<intptr_t>(event)) + "," + std::to_string(flags) + ")");
  return 0;
}
int cudaGetLastError() { return 0; }
const char* cudaGetErrorString(int error) { return "stand-in error"; }
const char* stand_in_record() { return record.c_str(); }
void stand_in_invalidate() { invalidated = true; }
}
