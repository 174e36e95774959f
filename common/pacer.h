// Pacer: holds a loop to a rate (files, bytes, databases per second) by sleeping the calling
// thread whenever the units taken so far are ahead of the rate since the pacer was made. A
// rate of 0 or less never sleeps. Used by the auditors. Thread-compatible.
#pragma once

#include <chrono>
#include <thread>

namespace apus::common {

class Pacer {
 public:
  explicit Pacer(double per_second) : per_second_(per_second) {}
  void take(double units) {
    if (per_second_ <= 0) return;
    owed_ += units / per_second_;
    const double ahead =
        owed_ - std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
    if (ahead > 0) std::this_thread::sleep_for(std::chrono::duration<double>(ahead));
  }

 private:
  double per_second_;
  double owed_ = 0;  // seconds the units taken so far should have lasted
  std::chrono::steady_clock::time_point began_ = std::chrono::steady_clock::now();
};

}  // namespace apus::common
