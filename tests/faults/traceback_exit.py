# A Python rank that ends with an exception (tests/test_faults.cpp): exit code 1, and the exception
# line is the cause hvrun names.
def load_shard(index):
    raise ValueError(f"bad shard {index}")


load_shard(7)
