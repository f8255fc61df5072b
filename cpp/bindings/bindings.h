// The parts of the module, each defined in its own file (core.cpp calls them).
#pragma once

#include <pybind11/pybind11.h>

namespace nncodecs_py {

namespace py = pybind11;

void def_frame(py::module_& m);     // frame.cpp: encode, decode, headers
void def_gpu_host(py::module_& m);  // gpu_host.cpp: the GPU encoder's and decoder's host
void def_testing(py::module_& m);   // testing.cpp: kernel variant toggles
void def_constants(py::module_& m);  // constants.cpp: the format's constants

}  // namespace nncodecs_py
