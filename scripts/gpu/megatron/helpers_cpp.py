"""A pure-Python stand-in for Megatron-LM's compiled dataset helper
(megatron/core/datasets/helpers.cpp), for a machine without a C++ compiler or
pybind11. scripts/gpu/simulate_layouts.sh copies it next to helpers.cpp only
when compiling fails; real and simulated runs then use it alike. Only what
GPTDataset (mock data included) calls is here."""
import numpy


def _build_sample_idx(dtype, sizes, document_idx, seq_length, num_epochs, tokens_per_epoch,
                      drop_last_partial_sequence=True, add_extra_token_to_sequence=1):
    # the loop of helpers.cpp's build_sample_idx, line for line
    if drop_last_partial_sequence:
        num_samples = (num_epochs * tokens_per_epoch - add_extra_token_to_sequence) // seq_length
    else:
        num_samples = -(-(num_epochs * tokens_per_epoch - add_extra_token_to_sequence) // seq_length)
    out = numpy.zeros((num_samples + 1, 2), dtype=dtype)
    i, doc_i, offset = 1, 0, 0
    last = document_idx.shape[0] - 1
    while i <= num_samples:
        remaining = seq_length + add_extra_token_to_sequence
        while remaining != 0:
            length = int(sizes[document_idx[doc_i]]) - offset
            remaining -= length
            if remaining <= 0:
                offset += remaining + length - add_extra_token_to_sequence
                remaining = 0
            else:
                if doc_i == last:
                    offset = int(sizes[document_idx[doc_i]]) - add_extra_token_to_sequence
                    break
                doc_i += 1
                offset = 0
        out[i] = (doc_i, offset)
        i += 1
    return out


def build_sample_idx_int32(*args):
    return _build_sample_idx(numpy.int32, *args)


def build_sample_idx_int64(*args):
    return _build_sample_idx(numpy.int64, *args)


def build_blending_indices(*args):
    raise NotImplementedError("helpers_cpp.py stand-in: blended datasets need the compiled helper")


def build_exhaustive_blending_indices(*args):
    raise NotImplementedError("helpers_cpp.py stand-in: blended datasets need the compiled helper")
