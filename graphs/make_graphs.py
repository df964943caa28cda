#!/usr/bin/env python3
"""Derives the bundled training graphs from real architectures.

Each forward op's output size is its tensor shape times the element size; its cost is its
forward FLOPs in GFLOP. The backward part follows Checkmate's Keras extraction rule (the
one `remat gen random-layered` uses): for every forward edge u -> i, gradient edges
b(i) -> b(u) and i -> b(u); i -> b(i); the loss reads the last forward op and b(last)
reads the loss. A gradient has the size of its activation and costs twice its forward op.

Run from the repository root: python3 graphs/make_graphs.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def training_graph(name, forward, fixed_memory, loss_bytes=4):
    """forward: list of (id, gflops, out_bytes, inputs, op)."""
    nodes = []
    consumers = {f[0]: [] for f in forward}
    for fid, _, _, inputs, _ in forward:
        for u in inputs:
            consumers[u].append(fid)
    for fid, gflops, out, inputs, op in forward:
        nodes.append({"id": fid, "cost": round(gflops, 4), "memory": out,
                      "inputs": inputs, "kind": "forward", "op": op})
    last = forward[-1][0]
    nodes.append({"id": "loss", "cost": 0.001, "memory": loss_bytes,
                  "inputs": [last], "kind": "loss", "op": "loss"})
    for fid, gflops, out, inputs, op in reversed(forward):
        grad_inputs = []
        for c in consumers[fid]:
            grad_inputs += ["d_" + c, c]
        grad_inputs.append(fid)
        if fid == last:
            grad_inputs.append("loss")
        nodes.append({"id": "d_" + fid, "cost": round(2 * gflops, 4), "memory": out,
                      "inputs": grad_inputs, "kind": "backward", "op": op + "_grad"})
    graph = {"name": name, "fixed_memory": fixed_memory, "cost_unit": "GFLOP", "nodes": nodes}
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(graph, f, indent=1)
        f.write("\n")


def resnet18():
    """ResNet-18 at batch 64, 224x224, fp32, one node per conv/bn-relu/add: residual
    blocks make it a DAG with skip edges; block outputs are articulation points."""
    b = 64
    forward = []

    def conv(fid, inputs, cin, cout, k, hw_out):
        flops = 2 * b * hw_out * hw_out * cout * cin * k * k
        forward.append((fid, flops / 1e9, b * cout * hw_out * hw_out * 4, inputs, "conv"))

    conv("conv1", [], 3, 64, 7, 112)
    forward.append(("pool1", b * 64 * 56 * 56 * 9 / 1e9, b * 64 * 56 * 56 * 4, ["conv1"], "maxpool"))
    prev, cin, hw = "pool1", 64, 56
    for stage, cout in enumerate([64, 128, 256, 512]):
        for block in range(2):
            stride = 2 if (stage > 0 and block == 0) else 1
            hw_out = hw // stride
            p = f"s{stage}b{block}"
            conv(p + "_conv1", [prev], cin, cout, 3, hw_out)
            conv(p + "_conv2", [p + "_conv1"], cout, cout, 3, hw_out)
            skip = prev
            if stride != 1 or cin != cout:
                conv(p + "_down", [prev], cin, cout, 1, hw_out)
                skip = p + "_down"
            out = b * cout * hw_out * hw_out * 4
            forward.append((p + "_add", out / 4 / 1e9, out, [p + "_conv2", skip], "add_relu"))
            prev, cin, hw = p + "_add", cout, hw_out
    forward.append(("pool", b * 512 * 49 / 1e9, b * 512 * 4, [prev], "avgpool"))
    forward.append(("fc", 2 * b * 512 * 1000 / 1e9, b * 1000 * 4, ["pool"], "linear"))
    params = 11_689_512
    training_graph("resnet18", forward, fixed_memory=params * 4 * 4)


def unet_small():
    """A 3-level U-Net at batch 16, 256x256, fp32: long skip connections from each encoder
    level to its decoder level, so no encoder op but the bottleneck separates the graph."""
    b = 16
    forward = []

    def conv(fid, inputs, cin, cout, hw):
        flops = 2 * b * hw * hw * cout * cin * 9
        forward.append((fid, flops / 1e9, b * cout * hw * hw * 4, inputs, "conv"))

    conv("enc1", [], 3, 32, 256)
    forward.append(("down1", b * 32 * 128 * 128 / 1e9, b * 32 * 128 * 128 * 4, ["enc1"], "maxpool"))
    conv("enc2", ["down1"], 32, 64, 128)
    forward.append(("down2", b * 64 * 64 * 64 / 1e9, b * 64 * 64 * 64 * 4, ["enc2"], "maxpool"))
    conv("enc3", ["down2"], 64, 128, 64)
    forward.append(("down3", b * 128 * 32 * 32 / 1e9, b * 128 * 32 * 32 * 4, ["enc3"], "maxpool"))
    conv("bottleneck", ["down3"], 128, 256, 32)
    forward.append(("up3", b * 128 * 64 * 64 * 2 * 256 * 4 / 1e9, b * 128 * 64 * 64 * 4, ["bottleneck"], "upconv"))
    conv("dec3", ["up3", "enc3"], 256, 128, 64)
    forward.append(("up2", b * 64 * 128 * 128 * 2 * 128 * 4 / 1e9, b * 64 * 128 * 128 * 4, ["dec3"], "upconv"))
    conv("dec2", ["up2", "enc2"], 128, 64, 128)
    forward.append(("up1", b * 32 * 256 * 256 * 2 * 64 * 4 / 1e9, b * 32 * 256 * 256 * 4, ["dec2"], "upconv"))
    conv("dec1", ["up1", "enc1"], 64, 32, 256)
    conv("head", ["dec1"], 32, 1, 256)
    training_graph("unet-small", forward, fixed_memory=1_940_000 * 4 * 4)


def tiny_residual():
    """One residual block (conv, relu, conv, add) at batch 32, 64 channels, 56x56, fp32:
    9 nodes, small enough for the exhaustive oracle."""
    b, c, hw = 32, 64, 56
    act = b * c * hw * hw * 4
    conv = 2 * b * hw * hw * c * c * 9 / 1e9
    forward = [
        ("conv_a", conv, act, [], "conv"),
        ("relu", act / 4 / 1e9, act, ["conv_a"], "relu"),
        ("conv_b", conv, act, ["relu"], "conv"),
        ("add", act / 4 / 1e9, act, ["conv_b", "conv_a"], "add"),
    ]
    training_graph("tiny-residual", forward, fixed_memory=2 * 64 * 64 * 9 * 4 * 4)


if __name__ == "__main__":
    tiny_residual()
    resnet18()
    unet_small()
