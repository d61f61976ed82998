// UvHandle<T>: owns one heap-allocated libuv handle (uv_tcp_t, uv_async_t,
// uv_timer_t, uv_signal_t, ...). libuv may only free a handle's memory after
// its close callback ran, so close() hands the memory to that callback; the
// loop must run once more after close() for the memory to be released (the
// server runs it to completion in its destructor).
//
// Usage: init with the matching uv_*_init(loop, h.get(), ...) and then
// mark_initialized(); set h.get()->data for callbacks. close() clears `data`,
// so a callback that fires for a closing handle sees nullptr.
#pragma once

#include <uv.h>

#include <memory>

namespace larder {

template <typename T>
class UvHandle {
 public:
  UvHandle() : h_(std::make_unique<T>()) {}
  ~UvHandle() { close(); }
  UvHandle(const UvHandle&) = delete;
  UvHandle& operator=(const UvHandle&) = delete;

  T* get() const { return h_.get(); }
  uv_handle_t* handle() const { return reinterpret_cast<uv_handle_t*>(h_.get()); }
  void mark_initialized() { initialized_ = true; }
  bool is_open() const { return h_ != nullptr && initialized_; }

  // Starts closing (idempotent). Never-initialized handles are just freed.
  void close() {
    if (!h_) return;
    if (!initialized_) {
      h_.reset();
      return;
    }
    h_->data = nullptr;
    uv_close(handle(), [](uv_handle_t* h) { std::unique_ptr<T> owned(reinterpret_cast<T*>(h)); });
    (void)h_.release();  // now owned by the close callback
  }

 private:
  std::unique_ptr<T> h_;
  bool initialized_ = false;
};

}  // namespace larder
