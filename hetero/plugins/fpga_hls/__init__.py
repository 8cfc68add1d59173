"""The fpga_hls backend (issue 15), being built: tensor IR rendered as Vitis-HLS C++ with
pragmas (:mod:`.emit`), checked by C simulation with g++ (:mod:`.csim`). Not registered
as a backend yet."""
