# Turns a file into a C array, so the installed binary carries it (no data file to find at run
# time). Usage: cmake -DIN=<file> -DOUT=<file.c> -DSYMBOL=<name> -DHEADER=<include> -P embed.cmake
# Defines `const unsigned char SYMBOL[]` (NUL-terminated) and `const size_t SYMBOL_len`.
file(READ "${IN}" _hex HEX)
string(LENGTH "${_hex}" _nhex)
math(EXPR _len "${_nhex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _body "${_hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n    " _body "${_body}")
file(WRITE "${OUT}.tmp"
    "/* Generated from ${IN} by embed.cmake; do not edit. */\n"
    "#include <stddef.h>\n#include \"${HEADER}\"\n\n"
    "const unsigned char ${SYMBOL}[] = {\n    ${_body}0x00\n};\n"
    "const size_t ${SYMBOL}_len = ${_len};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
