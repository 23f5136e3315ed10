#pragma once
// Whether a loaded object defines a dynamic symbol, found through each object's GNU hash table
// (dl_iterate_phdr), for libhvrun_crash.so's constructor: it asks so before dlsym, since a dlsym that
// fails (the common case: Python's symbols in a program that is not Python) formats an error and
// mallocs it, a cost every rank would pay at start. No libstdc++.
namespace hvrun::crash_handler {

// True when some loaded object with a GNU hash table defines `name`; objects without one are not read.
bool loaded_objects_define(const char* name);

}  // namespace hvrun::crash_handler
