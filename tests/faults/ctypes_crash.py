# A Python rank that segfaults in native code through ctypes (tests/test_faults.cpp): its Python
# frame (poison_batch) and its native stack must be in hvrun's report.
import ctypes


def poison_batch():
    return ctypes.string_at(0)


print("loading batch", flush=True)
poison_batch()
