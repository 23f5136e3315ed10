# cmake -DINPUT=FILE -DOUTPUT=X.cpp -DSYMBOL=NAME -P embed_file.cmake: writes X.cpp defining the bytes of
# FILE as hvrun::NAME (an array) and hvrun::NAME_size, so that a program carries FILE inside itself.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){32})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.new"
  "// Written by cmake/embed_file.cmake from ${INPUT}; do not edit.\n#include <cstddef>\n"
  "namespace hvrun {\nextern const unsigned char ${SYMBOL}[] = {\n${bytes}\n};\n"
  "extern const std::size_t ${SYMBOL}_size = ${size};\n}  // namespace hvrun\n")
file(COPY_FILE "${OUTPUT}.new" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.new")
