#!/usr/bin/python3
"""The parser conformance corpus and its oracle.

Frames are built with scapy (an independent generator: none of wirespeed's code writes them),
written to a capture, and dissected by Wireshark's tshark. For every frame this prints one line,
tab-separated: the case name, the frame in hex, and what tshark found in the fields wirespeed's
flow key holds, normalised to `name=value` words:

    verdict=ok|malformed eth_src eth_dst ethertype vlans ip_src ip_dst ip_proto
    fragment=no|first|later l4_src l4_dst

The Rust test (`tests/conformance.rs`) parses the same frames and prints the same words.

Usage: oracle.py DIRECTORY  (the capture is written there)
"""

import ipaddress
import random
import subprocess
import sys

from scapy.all import (ARP, ICMP, IP, LLC, SNAP, STP, TCP, UDP, Dot1AD, Dot1Q, Dot3,
                       Ether, ICMPv6EchoRequest, ICMPv6ND_NS, IPOption, IPv6,
                       IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop,
                       IPv6ExtHdrRouting, Raw, RawPcapWriter, fuzz, raw)

SRC, DST = "02:00:00:00:00:01", "02:00:00:00:00:02"
A4, B4 = "198.18.0.1", "198.18.1.2"
A6, B6 = "2001:db8::1", "2001:db8:1::2"
DATA = Raw(b"wirespeed conformance payload")


def eth(**kw):
    return Ether(src=SRC, dst=DST, **kw)


def ip(**kw):
    return IP(src=A4, dst=B4, **kw)


def ip6(**kw):
    return IPv6(src=A6, dst=B6, **kw)


def tags(depth, inner):
    """`depth` stacked tags (the outer one a service tag when there are several) over `inner`."""
    frame = eth()
    for i in range(depth):
        frame = frame / (Dot1AD(vlan=100 + i) if i == 0 and depth > 1 else Dot1Q(vlan=100 + i))
    return frame / inner


def option(data):
    return eth() / ip(options=[IPOption(data)]) / UDP(sport=1000, dport=2000) / DATA


def cut(frame, length):
    return raw(frame)[:length]


def patched(frame, at, data):
    b = bytearray(raw(frame))
    b[at:at + len(data)] = data
    return bytes(b)


def cases():
    udp = UDP(sport=1000, dport=2000) / DATA
    tcp = TCP(sport=1000, dport=80, flags="S")
    yield "ipv4-udp", eth() / ip() / udp
    yield "ipv4-tcp", eth() / ip() / tcp
    yield "ipv4-icmp-echo", eth() / ip() / ICMP(type=8, code=0) / DATA
    yield "ipv4-icmp-unreachable", eth() / ip() / ICMP(type=3, code=1) / ip() / UDP()
    yield "ipv4-experimental-protocol", eth() / ip(proto=253) / DATA
    yield "ipv4-short-padded", eth() / ip() / UDP(sport=1, dport=2)
    # IPv4 options, valid and not.
    yield "ipv4-options-nop-eol", option(b"\x01\x01\x01\x00")
    yield "ipv4-option-router-alert", option(b"\x94\x04\x00\x00")
    yield "ipv4-option-record-route", option(b"\x07\x07\x04" + bytes(4) + b"\x00")
    yield "ipv4-option-timestamp", option(b"\x44\x0c\x05\x00" + bytes(8))
    yield "ipv4-option-unknown", option(b"\x99\x02\x00\x00")
    yield "ipv4-option-router-alert-short", option(b"\x94\x03\x00\x00")
    yield "ipv4-option-stream-id-short", option(b"\x88\x03\x00\x00")
    yield "ipv4-option-quick-start-short", option(b"\x19\x04\x00\x00")
    yield "ipv4-option-record-route-short", option(b"\x07\x02\x00\x00")
    yield "ipv4-option-traceroute-short", option(b"\x52\x04\x00\x00")
    yield "ipv4-option-overruns", option(b"\x94\x05\x00\x00")
    yield "ipv4-option-zero-length", option(b"\x94\x00\x00\x00")
    yield "ipv4-option-no-length-byte", option(b"\x01\x01\x01\x94")
    # IPv4 fragments.
    yield "ipv4-udp-first-fragment", eth() / ip(flags="MF") / UDP(sport=7, dport=9, len=1000) / DATA
    yield "ipv4-tcp-first-fragment-8-bytes", eth() / ip(flags="MF", proto=6) / Raw(b"\x03\xe8\x00\x50" + bytes(4))
    yield "ipv4-later-fragment", eth() / ip(frag=100, proto=17) / DATA
    yield "ipv4-last-fragment", eth() / ip(frag=3, proto=6) / DATA
    # IPv4 malformations.
    yield "ipv4-truncated-header", cut(eth() / ip() / udp, 14 + 12)
    yield "ipv4-ihl-below-5", patched(eth() / ip() / udp, 14, b"\x44")
    yield "ipv4-version-6-in-ipv4", patched(eth() / ip() / udp, 14, b"\x65")
    yield "ipv4-total-length-beyond-frame", eth() / ip(len=300) / udp
    yield "ipv4-total-length-below-header", eth() / ip(len=12) / udp
    yield "ipv4-ihl-beyond-total-length", patched(eth() / ip(len=40) / udp, 14, b"\x4f")
    yield "udp-length-below-8", eth() / ip() / UDP(len=5) / DATA
    yield "udp-length-beyond-ip", eth() / ip() / UDP(len=500) / DATA
    yield "udp-truncated", eth() / ip(proto=17) / Raw(b"\x03\xe8\x07")
    yield "tcp-data-offset-below-5", eth() / ip() / TCP(dataofs=4)
    yield "tcp-data-offset-beyond-segment", eth() / ip() / TCP(dataofs=15)
    yield "tcp-options", eth() / ip() / TCP(options=[("MSS", 1460), ("NOP", None), ("WScale", 7), ("SAckOK", b""), ("Timestamp", (1, 0))])
    # TCP options are not the forwarder's business (nor malformed to Wireshark when their
    # lengths are off); random ones are left out of the fuzzed frames below, since Wireshark's
    # dissectors of some (TCP Fast Open) call the segment malformed and the parser never reads them.
    for name, data in (("mss-short", b"\x02\x03\x05\x00"), ("sack-overruns", b"\x05\x0a\x00\x00")):
        yield f"tcp-option-{name}", eth() / ip() / TCP(dataofs=6) / Raw(data)
    yield "tcp-truncated", eth() / ip(proto=6) / Raw(b"\x03\xe8\x00\x50" + bytes(8))
    yield "icmp-truncated", eth() / ip(proto=1) / Raw(b"\x08\x00\x00\x00")
    # IPv6.
    yield "ipv6-udp", eth() / ip6() / udp
    yield "ipv6-tcp", eth() / ip6() / tcp
    yield "ipv6-icmp-echo", eth() / ip6() / ICMPv6EchoRequest()
    yield "ipv6-neighbour-solicitation", eth() / ip6(hlim=255) / ICMPv6ND_NS(tgt=B6)
    yield "ipv6-hop-by-hop-udp", eth() / ip6() / IPv6ExtHdrHopByHop() / udp
    yield "ipv6-dest-opts-routing-tcp", eth() / ip6() / IPv6ExtHdrDestOpt() / IPv6ExtHdrRouting() / tcp
    yield "ipv6-udp-first-fragment", eth() / ip6() / IPv6ExtHdrFragment(m=1) / UDP(sport=7, dport=9, len=1000) / DATA
    yield "ipv6-later-fragment", eth() / ip6() / IPv6ExtHdrFragment(offset=100, nh=17) / DATA
    yield "ipv6-later-fragment-dest-opts-after", eth() / ip6() / IPv6ExtHdrFragment(offset=10, nh=60) / Raw(b"\x11\x08" + bytes(30))
    yield "ipv6-truncated-header", cut(eth() / ip6() / udp, 14 + 30)
    yield "ipv6-version-4-in-ipv6", patched(eth() / ip6() / udp, 14, b"\x40")
    yield "ipv6-payload-length-beyond-frame", eth() / ip6(plen=400) / udp
    yield "ipv6-extension-header-overruns", eth() / ip6(nh=0) / Raw(b"\x11\x09" + bytes(6))
    yield "ipv6-udp-length-beyond-payload", eth() / ip6() / UDP(len=300) / DATA
    # VLAN stacks.
    for depth in (1, 2, 3, 8, 9):
        yield f"vlan-{depth}-ipv4-udp", tags(depth, ip() / udp)
    yield "vlan-2-ipv6-tcp", tags(2, ip6() / tcp)
    yield "vlan-truncated-tag", cut(eth() / Dot1Q(vlan=5) / ip() / udp, 16)
    # ARP and other EtherTypes.
    yield "arp-request", eth(type=0x0806) / ARP(op=1, psrc=A4, pdst=B4)
    yield "arp-reply-tagged", tags(1, ARP(op=2, psrc=B4, pdst=A4))
    yield "arp-truncated", cut(eth() / ARP(), 14 + 20)
    yield "local-experimental-ethertype", eth(type=0x88b5) / Raw(bytes(40))
    yield "unknown-ethertype", eth(type=0x1234) / Raw(bytes(46))
    yield "ethernet-truncated", cut(eth() / ip() / udp, 10)
    # IEEE 802.3 with LLC and SNAP.
    dot3 = Dot3(src=SRC, dst=DST)
    yield "llc-stp", dot3 / LLC() / STP()
    yield "snap-ipv4-udp", dot3 / LLC() / SNAP(OUI=0, code=0x0800) / ip() / udp
    yield "snap-ipv6-tcp", dot3 / LLC() / SNAP(OUI=0, code=0x86dd) / ip6() / tcp
    yield "snap-arp", dot3 / LLC() / SNAP(OUI=0, code=0x0806) / ARP(op=1, psrc=A4, pdst=B4)
    yield "snap-other-oui", dot3 / LLC() / SNAP(OUI=0x123456, code=0x0001) / Raw(bytes(30))
    stp = LLC() / STP()
    yield "vlan-llc-stp", eth() / Dot1Q(vlan=7, type=len(stp)) / stp
    yield "jumbo-llc-ethertype", eth(type=0x8870) / LLC() / SNAP(OUI=0, code=0x0800) / ip() / udp
    yield "dot3-length-beyond-frame", Dot3(src=SRC, dst=DST, len=1000) / LLC() / STP()
    # Random headers (scapy's fuzz: every field not given is random), seeded to stay the same.
    random.seed(2544)
    for i in range(40):
        yield f"fuzz-ipv4-udp-{i}", eth() / fuzz(IP(src=A4, dst=B4, version=4, ihl=5, frag=0, flags=0, proto=17)) / fuzz(UDP())
    for i in range(20):
        yield f"fuzz-ipv6-tcp-{i}", eth() / ip6() / fuzz(TCP(options=[]))


FIELDS = [
    "frame.protocols", "eth.src", "eth.dst", "eth.type", "vlan.id", "ieee8021ad.id",
    "vlan.etype", "llc.oui", "llc.pid", "ip.src", "ip.dst", "ip.proto",
    "ip.flags.mf", "ip.frag_offset", "ipv6.src", "ipv6.dst", "ipv6.nxt", "ipv6.fraghdr.nxt",
    "ipv6.fraghdr.offset", "ipv6.fraghdr.more", "tcp.srcport", "tcp.dstport", "udp.srcport",
    "udp.dstport", "icmp.type", "icmp.code", "icmpv6.type", "icmpv6.code", "arp.opcode",
    "arp.src.proto_ipv4", "arp.dst.proto_ipv4", "_ws.malformed", "_ws.expert.severity",
]
PI_ERROR = 0x00800000


def first(values):
    return values[0] if values else None


def expected(f):
    """The flow key fields, as the Rust test writes them, from one frame's tshark fields."""
    protocols = f["frame.protocols"][0].split(":") if f["frame.protocols"] else []
    severities = [int(s) for s in f["_ws.expert.severity"]]
    if f["_ws.malformed"] or any(s >= PI_ERROR for s in severities):
        return ["verdict=malformed"]
    words = ["verdict=ok", f"eth_src={first(f['eth.src'])}", f"eth_dst={first(f['eth.dst'])}"]
    l3 = next((p for p in protocols if p in ("ip", "ipv6", "arp")), None)
    if l3 is not None:
        ethertype = {"ip": 0x0800, "ipv6": 0x86DD, "arp": 0x0806}[l3]
    elif "llc" in protocols:
        oui, pid = first(f["llc.oui"]), first(f["llc.pid"])
        ethertype = int(pid, 16) if oui is not None and int(oui, 16) == 0 and pid else 0x05FF
    else:
        types = f["vlan.etype"] or f["eth.type"]
        ethertype = int(types[-1], 16)
    words.append(f"ethertype={ethertype:#06x}")
    vlans = f["ieee8021ad.id"] + f["vlan.id"]
    words.append("vlans=" + (",".join(vlans) if vlans else "-"))
    src = dst = proto = None
    fragment, l4 = "no", (None, None)
    if l3 == "ip":
        src, dst, proto = first(f["ip.src"]), first(f["ip.dst"]), int(first(f["ip.proto"]))
        offset, more = int(first(f["ip.frag_offset"])), first(f["ip.flags.mf"]) in ("1", "True")
        fragment = "later" if offset else ("first" if more else "no")
    elif l3 == "ipv6":
        src, dst = first(f["ipv6.src"]), first(f["ipv6.dst"])
        if f["ipv6.fraghdr.offset"]:
            offset = int(first(f["ipv6.fraghdr.offset"]))
            more = first(f["ipv6.fraghdr.more"]) in ("1", "True")
            fragment = "later" if offset else ("first" if more else "no")
        if fragment == "later":
            proto = int(first(f["ipv6.fraghdr.nxt"]))
        else:
            upper = next((p for p in protocols if p in ("tcp", "udp", "icmpv6")), None)
            proto = {"tcp": 6, "udp": 17, "icmpv6": 58}[upper] if upper else int(f["ipv6.nxt"][-1])
    elif l3 == "arp":
        src, dst = first(f["arp.src.proto_ipv4"]), first(f["arp.dst.proto_ipv4"])
        proto = int(first(f["arp.opcode"])) & 0xFF
    if fragment != "later" and l3 in ("ip", "ipv6"):
        if proto == 6:
            l4 = first(f["tcp.srcport"]), first(f["tcp.dstport"])
        elif proto == 17:
            l4 = first(f["udp.srcport"]), first(f["udp.dstport"])
        elif proto in (1, 58):
            family = "icmp" if proto == 1 else "icmpv6"
            kind, code = first(f[f"{family}.type"]), first(f[f"{family}.code"])
            if kind is not None:
                l4 = (int(kind) << 8) | int(code), 0
    words += [
        f"ip_src={ipaddress.ip_address(src) if src else '-'}",
        f"ip_dst={ipaddress.ip_address(dst) if dst else '-'}",
        f"ip_proto={proto if proto is not None else 0}",
        f"fragment={fragment}",
        f"l4_src={l4[0] if l4[0] is not None else 0}",
        f"l4_dst={l4[1] if l4[1] is not None else 0}",
    ]
    return words


def main():
    directory = sys.argv[1]
    named = [(name, raw(frame) if not isinstance(frame, bytes) else frame) for name, frame in cases()]
    capture = f"{directory}/conformance.pcap"
    with RawPcapWriter(capture, linktype=1) as writer:
        for _, data in named:
            writer.write(data)
    command = ["tshark", "-r", capture, "-n", "-o", "ip.defragment:FALSE",
               "-o", "ipv6.defragment:FALSE", "-T", "fields", "-E", "occurrence=a",
               "-E", "aggregator=|", "-E", "separator=/t"]
    for field in FIELDS:
        command += ["-e", field]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rows = out.rstrip("\n").split("\n")
    if len(rows) != len(named):
        sys.exit(f"tshark printed {len(rows)} rows for {len(named)} frames")
    for (name, data), row in zip(named, rows):
        values = row.split("\t")
        fields = {k: (v.split("|") if v else []) for k, v in zip(FIELDS, values)}
        print(f"{name}\t{data.hex()}\t{' '.join(expected(fields))}")


if __name__ == "__main__":
    main()
