// One fuzz input for the CLI's .npy reader (cli/npy.h, used through its
// public functions only): the bytes are parsed as a header dictionary and
// loaded as a whole file. Checks:
//  * the only failures are NpyError (header) / CliError (load) with a
//    message of one line of ASCII; nothing else escapes, nothing crashes;
//  * a file in numpy's form (magic, version 1.0-3.0, the header dictionary
//    as numpy writes it, any padding, one of the five supported dtypes,
//    exactly the data its shape needs; every numpy.save file of those
//    dtypes among them), recognised here without the reader's code, loads,
//    as that dtype, order and shape;
//  * a loaded array's DLTensor is consistent: ndim/shape/dtype/strides match
//    the header, data is element-aligned, and every data byte is readable
//    (ASan checks the reads) and equals the file's bytes after the header;
//  * format_npy_header of what was read parses back to the same header, and
//    its length is a multiple of 64 (data alignment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mgh {

std::string check_npy_input(const uint8_t* data, size_t size);

}  // namespace mgh
