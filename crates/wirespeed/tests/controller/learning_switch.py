"""A learning switch for OpenFlow 1.3 written with os-ken (the maintained Ryu fork), the
controller of crates/wirespeed/tests/openflow_controller.rs.

It is the classic one: on connect, a table-miss flow entry sends every unknown frame to the
controller; each PACKET_IN teaches the source MAC's port, installs a flow for a destination
it knows (in_port, eth_src, eth_dst -> output), and sends the frame on with a PACKET_OUT
(to the learned port, or FLOOD). Every PACKET_IN, flow it installs and PORT_STATUS it
receives is printed, one line each, for the test to read.

Usage: python learning_switch.py PORT  (listens on 127.0.0.1:PORT)
"""

import sys

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, packet
from os_ken.ofproto import ofproto_v1_3


def say(line):
    print(line, flush=True)


class LearningSwitch(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # datapath id -> MAC -> port
        self.ports = {}

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, event):
        datapath = event.msg.datapath
        ofproto, parser = datapath.ofproto, datapath.ofproto_parser
        to_controller = parser.OFPActionOutput(ofproto.OFPP_CONTROLLER, ofproto.OFPCML_NO_BUFFER)
        self.add_flow(datapath, 0, parser.OFPMatch(), [to_controller])
        say("connected datapath %016x" % datapath.id)

    def add_flow(self, datapath, priority, match, actions):
        ofproto, parser = datapath.ofproto, datapath.ofproto_parser
        instructions = [parser.OFPInstructionActions(ofproto.OFPIT_APPLY_ACTIONS, actions)]
        datapath.send_msg(
            parser.OFPFlowMod(
                datapath=datapath, priority=priority, match=match, instructions=instructions
            )
        )

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, event):
        message = event.msg
        datapath = message.datapath
        ofproto, parser = datapath.ofproto, datapath.ofproto_parser
        in_port = message.match["in_port"]
        frame = ethernet_header(message.data)
        if frame is None:
            return
        ports = self.ports.setdefault(datapath.id, {})
        ports[frame.src] = in_port
        out_port = ports.get(frame.dst, ofproto.OFPP_FLOOD)
        say(
            "packet_in reason=%d table=%d in_port=%d len=%d total_len=%d src=%s dst=%s out=%s"
            % (
                message.reason,
                message.table_id,
                in_port,
                len(message.data),
                message.total_len,
                frame.src,
                frame.dst,
                "flood" if out_port == ofproto.OFPP_FLOOD else out_port,
            )
        )
        actions = [parser.OFPActionOutput(out_port)]
        if out_port != ofproto.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_src=frame.src, eth_dst=frame.dst)
            self.add_flow(datapath, 1, match, actions)
            say("flow in_port=%d eth_src=%s eth_dst=%s output=%d" % (in_port, frame.src, frame.dst, out_port))
        datapath.send_msg(
            parser.OFPPacketOut(
                datapath=datapath,
                buffer_id=ofproto.OFP_NO_BUFFER,
                in_port=in_port,
                actions=actions,
                data=message.data,
            )
        )

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def port_status(self, event):
        message = event.msg
        say(
            "port_status reason=%d port=%d name=%s config=%d state=%d"
            % (
                message.reason,
                message.desc.port_no,
                message.desc.name.decode(errors="replace"),
                message.desc.config,
                message.desc.state,
            )
        )


def ethernet_header(data):
    try:
        return packet.Packet(data).get_protocol(ethernet.ethernet)
    except Exception:  # a frame os-ken cannot parse is not learned from
        return None


if __name__ == "__main__":
    cfg.CONF(
        ["--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", sys.argv[1]],
        project="os_ken",
    )
    app_manager.AppManager.run_apps(["os_ken.controller.ofp_handler", __name__])
