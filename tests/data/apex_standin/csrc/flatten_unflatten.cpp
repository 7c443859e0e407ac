// envbuild test stand-in for Apex's apex_C. It includes only small headers (pybind11 and
// torch/version.h) so the CPU build takes seconds, not the minutes <torch/extension.h> costs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/version.h>

#include <cstdint>
#include <vector>

// Offsets of each tensor in a flat buffer, given their element counts (what flatten computes).
std::vector<int64_t> flat_offsets(const std::vector<int64_t>& numels) {
  std::vector<int64_t> out;
  int64_t at = 0;
  for (int64_t n : numels) {
    out.push_back(at);
    at += n;
  }
  out.push_back(at);
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("flat_offsets", &flat_offsets, "offsets of tensors of these sizes in one flat buffer");
  m.attr("built_with_torch") = TORCH_VERSION;
}
