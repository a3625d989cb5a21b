#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target into fuzz/corpus/<target>/.

The seeds are small valid inputs (from docs/configuration.md and the crates' tests) and edge
cases, so that the fuzzer starts from inputs that reach deep into each parser instead of
spending its first minutes discovering a magic number. Binary seeds (frames, captures) are
built here rather than kept as opaque files, so a reader can see what each one is. Run it from
anywhere; it rewrites only the seeds it names (crash regressions added by hand stay).
"""
import os
import struct

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


# --- frames -------------------------------------------------------------------------------
DST = bytes.fromhex("020000000001")
SRC = bytes.fromhex("020000000002")


def ipv4(proto, payload, options=b""):
    ihl = 5 + len(options) // 4
    total = ihl * 4 + len(payload)
    header = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, 1, 0, 64, proto, 0,
                         bytes([198, 18, 0, 1]), bytes([198, 19, 0, 1])) + options
    checksum = 0
    for i in range(0, len(header), 2):
        checksum += (header[i] << 8) | header[i + 1]
    while checksum >> 16:
        checksum = (checksum & 0xFFFF) + (checksum >> 16)
    header = header[:10] + struct.pack("!H", ~checksum & 0xFFFF) + header[12:]
    return header + payload


def ipv6(next_header, payload):
    return struct.pack("!IHBB16s16s", 6 << 28, len(payload), next_header, 64,
                       bytes.fromhex("20010002" + "00" * 11 + "01"),
                       bytes.fromhex("20010002" + "00" * 11 + "02")) + payload


def udp(payload=b"wirespeed"):
    return struct.pack("!HHHH", 1024, 53, 8 + len(payload), 0) + payload


def tcp():
    # SYN with MSS and a NOP, window scale option.
    options = bytes([2, 4, 5, 0xB4, 1, 3, 3, 7])
    return struct.pack("!HHIIBBHHH", 40000, 80, 1, 0, (5 + len(options) // 4) << 4, 0x02,
                       65535, 0, 0) + options


def ethernet(ethertype, payload, tags=()):
    header = DST + SRC
    for tpid, vid in tags:
        header += struct.pack("!HH", tpid, vid)
    return header + struct.pack("!H", ethertype) + payload


FRAMES = {
    "ipv4-udp": ethernet(0x0800, ipv4(17, udp())),
    "ipv4-tcp-options": ethernet(0x0800, ipv4(6, tcp(), options=bytes([1, 1, 1, 0]))),
    "ipv4-icmp-echo": ethernet(0x0800, ipv4(1, bytes([8, 0, 0xF7, 0xFF, 0, 0, 0, 0]))),
    "ipv4-fragment": ethernet(0x0800, ipv4(17, udp())[:6] + b"\x20\x00" + ipv4(17, udp())[8:]),
    "ipv6-udp": ethernet(0x86DD, ipv6(17, udp())),
    "ipv6-hop-by-hop-tcp": ethernet(0x86DD, ipv6(0, bytes([6, 0, 1, 4, 0, 0, 0, 0]) + tcp())),
    "ipv6-fragment-udp": ethernet(0x86DD, ipv6(44, bytes([17, 0, 0, 1, 0, 0, 0, 9]) + udp())),
    "ipv6-icmpv6-echo": ethernet(0x86DD, ipv6(58, bytes([128, 0, 0, 0, 0, 1, 0, 1]))),
    "arp-request": ethernet(0x0806, struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, SRC,
                                                bytes([198, 18, 0, 1]), b"\0" * 6,
                                                bytes([198, 18, 0, 2]))),
    "vlan-ipv4-udp": ethernet(0x0800, ipv4(17, udp()), tags=[(0x8100, 10)]),
    "qinq-ipv6-udp": ethernet(0x86DD, ipv6(17, udp()), tags=[(0x88A8, 100), (0x8100, 10)]),
    "runt": DST + SRC + b"\x08",
}
for name, frame in FRAMES.items():
    write("parse", name, frame)

# --- captures -------------------------------------------------------------------------------


def pcap(frames, big_endian=False, nanos=False, snaplen=65535):
    order = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, 1)
    for i, frame in enumerate(frames):
        out += struct.pack(order + "IIII", 1_700_000_000 + i, 500, len(frame), len(frame) + 4)
        out += frame
    return out


def block(order, kind, body):
    body += b"\0" * (-len(body) % 4)
    total = 12 + len(body)
    return struct.pack(order + "II", kind, total) + body + struct.pack(order + "I", total)


def option(order, code, value):
    return struct.pack(order + "HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def pcapng(big_endian=False):
    order = ">" if big_endian else "<"
    shb = block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1))
    # Interface 0: nanosecond resolution (if_tsresol 9) and a one-second if_tsoffset;
    # interface 1: binary resolution 2^-20 (if_tsresol 0x94).
    idb0 = block(order, 1, struct.pack(order + "HHI", 1, 0, 0)
                 + option(order, 9, bytes([9])) + option(order, 14, struct.pack(order + "q", 1))
                 + option(order, 0, b""))
    idb1 = block(order, 1, struct.pack(order + "HHI", 1, 0, 96) + option(order, 9, bytes([0x94])))
    frame = FRAMES["ipv4-udp"]
    epb = block(order, 6, struct.pack(order + "IIIII", 0, 0x00060000, 0x12345678, len(frame),
                                      len(frame)) + frame)
    epb_truncated = block(order, 6, struct.pack(order + "IIIII", 1, 1, 2, 60, 1514)
                          + (frame + bytes(60))[:60])
    spb = block(order, 3, struct.pack(order + "I", len(frame)) + frame)
    obsolete = block(order, 2, struct.pack(order + "HHIIII", 0, 0, 0, 1, len(frame), len(frame))
                     + frame)
    unknown = block(order, 0x0BAD, b"skipped")
    return shb + idb0 + idb1 + epb + epb_truncated + spb + obsolete + unknown


write("pcap", "classic-micro-le", pcap([FRAMES["ipv4-udp"], FRAMES["ipv6-udp"]]))
write("pcap", "classic-nano-be", pcap([FRAMES["arp-request"]], big_endian=True, nanos=True))
write("pcap", "classic-jumbo-record", pcap([bytes(3000)], snaplen=1514))
write("pcap", "classic-cut-short", pcap([FRAMES["ipv4-udp"]])[:-5])
write("pcap", "pcapng-le", pcapng())
write("pcap", "pcapng-be", pcapng(big_endian=True))
write("pcap", "pcapng-two-sections", pcapng() + pcapng(big_endian=True))
write("pcap", "empty", b"")

# --- text inputs ----------------------------------------------------------------------------
write("route_file", "mixed", "# routes\n10.0.0.0/8 via 198.18.1.1\n\n10.1.0.0/16 198.18.1.2 # more\n"
      "192.0.2.0/24 via 198.18.1.1\n2001:db8::/32 via 2001:db8::1")
write("route_file", "default-routes", "0.0.0.0/0 via 198.18.1.1\r\n::/0 via fe80::1\r\n")
write("route_file", "errors", "10.0.0.0/8 via ::1\n10.0.0.1/8 via 1.1.1.1\n10.0.0.0/40 via 1.1.1.1\n")
write("route_file", "not-utf8", b"10.0.0.0/8 via \xff\n")

write("acl_file", "docs", "# deny DNS from the test network, permit the rest\n"
      "deny proto=udp src=198.18.0.0/16 dst_port=53\npermit\n")
write("acl_file", "every-field", "deny ip_src=10.0.0.0/8 ip_dst=192.0.2.1 ip_proto=tcp "
      "l4_src=1000-2000 l4_dst=22\npermit proto=icmpv6 dst=2001:db8::/32\n"
      "deny proto=17 src_port=53\n")
write("acl_file", "errors", "deny proto=icmp src_port=1\ndeny src=10.0.0.0/8 dst=::1\n"
      "deny dst_port=2000-1000\nallow all\n")

write("flow_rule", "docs", "priority=10 table=0 in_port=p0 ip_dst=10.0.0.0/8 actions=dec_ttl,output:p1")
write("flow_rule", "every-field", "priority=7 in_port=p0 eth_src=02:00:00:00:00:01 "
      "eth_dst=02:00:00:00:00:02 eth_type=0x0800 vlan=10 ip_proto=udp ip_src=198.18.0.0/15 "
      "ip_dst=198.19.0.1 l4_src=1024 l4_dst=53 goto=1 idle_timeout=30 hard_timeout=60 cookie=0x1f "
      "actions=set_field:eth_dst=02:00:00:00:00:09,set_field:ip_src=198.18.0.9,"
      "set_field:l4_dst=5353,push_vlan:100,pop_vlan,output:p1")
write("flow_rule", "ipv6", "dl_type=0x86dd nw_src=2001:db8::/32 nw_proto=icmpv6 vlan=none "
      "actions=set_field:ip_dst=2001:db8::9,set_field:vlan_vid=20,flood")
write("flow_rule", "port-number", "in_port=1 actions=drop,flood")
write("flow_rule", "refused", "l4_dst=53 eth_type=0x8100 ip_src=10.0.0.0/8 ip_dst=::1 actions=drop")
write("flow_rule", "instructions", "priority=5 table=1 vlan_pcp=3 "
      "eth_dst=01:00:00:00:00:00/01:00:00:00:00:00 metadata=0x10/0xf0 eth_type=0x0800 "
      "ip_proto=icmp icmp_type=8 ip_src=10.0.0.1/255.0.0.255 actions=dec_ttl,clear_actions,"
      "write:set_field:eth_src=02:00:00:00:00:09,write:output:p1,write_metadata:0x2/0xf\n")
write("flow_rule", "arp", "priority=7 arp_op=1 arp_tpa=192.0.2.0/24 "
      "arp_spa=192.0.2.1/255.255.0.255 vlan=any actions=write:flood\n")

REQUESTS = {
    "help": "help", "ping": "ping", "show-ports": "show ports", "show-neighbors": "show neighbors",
    "route-show": "route show", "route-add": "route add 10.0.0.0/8 via 198.18.1.1",
    "route-add-v6": "route add 2001:db8::/32 via fe80::1", "route-del": "route remove 0.0.0.0/0",
    "route-load": "route load 42 routes.txt", "neighbour-add":
    "neighbour add 198.18.1.1 02:00:00:00:00:01 p1", "neighbour-del": "neighbor del 2001:db8::1",
    "mac-flush": "mac flush", "flow-add": "flow add priority=10 table=0 in_port=p0 "
    "ip_dst=10.0.0.0/8 actions=dec_ttl,output:p1", "flow-del": "flow del priority=10 in_port=p0",
    "acl-load": "acl load 17 acl.txt",
}
for name, request in REQUESTS.items():
    write("protocol", name, request)
write("protocol", "stream", "\r\n".join(REQUESTS.values()) + "\n" + "x" * 200 + "\npartial")
write("protocol", "errors", "rout add\nroute add 10.0.0.1/8 via 1.1.1.1\nshow\nflow add priority=x "
      "actions=drop\nflow add =x actions=drop\nroute load x y\n\xff\r\n")

# --- configuration --------------------------------------------------------------------------
PORTS = ('[[port]]\nname = "p0"\nbackend = "afxdp"\ninterface = "ws-d0"\n\n'
         '[[port]]\nname = "p1"\nbackend = "afxdp"\ninterface = "ws-d1"\n\n')
write("config", "xconnect", '[switch]\napp = "xconnect"\nbatch = 32\n\n' + PORTS
      + '[xconnect]\npairs = [["p0", "p1"]]\n')
write("config", "bridge", '[switch]\napp = "bridge"\n\n' + PORTS
      + '[bridge]\nmac_capacity = 8192\n\n[[bridge.port]]\nname = "p1"\ntrunk = [1, 10]\nnative = 1\n'
      + '\n[acl]\ndefault = "permit"\n\n[[acl.rule]]\naction = "deny"\nproto = "udp"\n'
      'src = "198.18.0.0/16"\ndst_port = "1000-2000"\n')
write("config", "router", '[switch]\napp = "router"\n\n' + PORTS
      + '[router]\nicmp_rate = 10\n\n[[router.interface]]\nport = "p0"\n'
      'addresses = ["198.18.0.254/24", "2001:2::fe/64"]\n\n[[router.interface]]\nport = "p1"\n'
      'mac = "02:00:00:00:00:09"\naddresses = ["198.18.1.254/24"]\n\n[[router.route]]\n'
      'prefix = "198.19.0.0/16"\nvia = ["198.18.1.1", "198.18.1.2"]\n\n[[router.neighbour]]\n'
      'port = "p1"\naddress = "198.18.1.1"\nmac = "02:57:53:00:01:01"\n')
write("config", "openflow", '[switch]\napp = "openflow"\n\n' + PORTS
      + '[openflow]\ntables = 2\nmiss = "drop"\n\n[[openflow.flow]]\npriority = 10\n'
      'match = "in_port=p0,ip_dst=10.0.0.0/8"\nactions = "dec_ttl"\ngoto = 1\n\n'
      '[[openflow.flow]]\ntable = 1\nactions = "set_field:eth_dst=02:00:00:00:00:01,output:p1"\n')
write("config", "syntax-error", '[switch\napp = "xconnect"\n')
