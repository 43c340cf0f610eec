`default_nettype none

/// DMA realigner: turns source-aligned R beats into destination-aligned beats with byte
/// strobes, one row at a time.
///
/// Every byte of a row moves from lane `(src + i) % BusBytes` to lane
/// `(dst + i) % BusBytes`, a left rotation by `rot = (dst_off - src_off) % BusBytes`.
/// Output beat k takes lanes [0, rot) from rotated input beat k-1 and lanes [rot, BusBytes)
/// from rotated input beat k. Beats whose strobes come out empty lie outside the
/// destination row and are not emitted, and a row may need one extra "flush" beat for the
/// tail of its last input beat. So the output is exactly the destination row's beats, in
/// address order, at one beat per cycle.
module npu_dma_align #(
  parameter int unsigned BusBytes = 16,   /// bytes per data beat
  localparam int unsigned OffWidth = $clog2(BusBytes),
  localparam int unsigned DataWidth = BusBytes * 8
) (
  input  wire                  clk_i,          /// clock
  input  wire                  rst_ni,         /// asynchronous reset, active low
  input  wire                  clear_i,        /// forget any partial row (end of transfer)
  input  wire                  drop_i,         /// aborting: accept and discard every R beat
  // Row descriptors (first-word-fall-through FIFO head).
  input  wire                  row_valid_i,
  output logic                 row_ready_o,
  input  wire  [OffWidth-1:0]  row_src_off_i,  /// source offset of the row's first byte
  input  wire  [OffWidth-1:0]  row_dst_off_i,  /// destination offset of the row's first byte
  input  wire  [31:0]          row_bytes_i,    /// bytes in the row (>= 1)
  // AXI4 read data channel.
  input  wire  [DataWidth-1:0] r_data_i,
  input  wire  [1:0]           r_resp_i,
  input  wire                  r_valid_i,
  output logic                 r_ready_o,
  // Destination-aligned beats to the data FIFO.
  output logic [DataWidth-1:0] out_data_o,
  output logic [BusBytes-1:0]  out_strb_o,
  output logic                 out_valid_o,
  input  wire                  out_ready_i,
  // Events.
  output logic                 r_error_o,      /// an accepted R beat had an error response
  output logic [31:0]          bytes_read_o    /// row bytes delivered by the accepted beat
);
  logic [31:0]          beat_idx_q;   // input beats of the current row already taken
  logic                 flush_q;      // the row's input is done; its tail beat is pending
  logic [DataWidth-1:0] prev_data_q;  // previous input beat, rotated
  logic [BusBytes-1:0]  prev_mask_q;

  // Row geometry from the descriptor at the head of the row FIFO.
  logic [OffWidth-1:0] rot;
  logic [32:0]         row_end;       // src_off + bytes
  logic [31:0]         last_beat;     // index of the row's last input beat
  logic [OffWidth-1:0] last_lane;     // lane of the row's last byte in its last input beat
  logic [BusBytes-1:0] low_lanes;     // lanes [0, rot)

  // The datapath below is computed only while a row is open (and the rotation only with a
  // beat on R): a verilated model evaluates combinational logic at every clock edge, and
  // this byte shuffling was about 7% of an idle cycle. Without a row nothing reads it.
  always_comb begin
    rot       = '0;
    row_end   = '0;
    last_beat = '0;
    last_lane = '0;
    low_lanes = '0;
    if (row_valid_i) begin
      rot       = row_dst_off_i - row_src_off_i;
      row_end   = 33'(row_src_off_i) + 33'(row_bytes_i);
      last_beat = 32'((row_end - 33'd1) >> OffWidth);
      last_lane = OffWidth'(row_end - 33'd1);
      for (int l = 0; l < BusBytes; l++) low_lanes[l] = l < int'(rot);
    end
  end

  // Lanes of the incoming beat that hold bytes of the row.
  wire first = beat_idx_q == '0;
  wire last  = beat_idx_q == last_beat;
  // Computed with the rotation below, only with a beat on R (the only time it is read):
  // in a block of its own, Verilator's dataflow optimizer computed it at every edge.
  logic [BusBytes-1:0] in_mask;

  // Rotate left by `r` lanes: lane l takes lane (l - r) mod BusBytes.
  function automatic logic [DataWidth-1:0] rotl_data(logic [DataWidth-1:0] d, logic [OffWidth-1:0] r);
    logic [DataWidth-1:0] out;
    for (int l = 0; l < BusBytes; l++) begin
      logic [OffWidth-1:0] src_lane;
      src_lane = OffWidth'(l) - r;
      out[l*8 +: 8] = d[int'(src_lane)*8 +: 8];
    end
    return out;
  endfunction
  function automatic logic [BusBytes-1:0] rotl_mask(logic [BusBytes-1:0] m, logic [OffWidth-1:0] r);
    logic [BusBytes-1:0] out;
    for (int l = 0; l < BusBytes; l++) out[l] = m[OffWidth'(l) - r];
    return out;
  endfunction

  // Any response with bit 1 set (SLVERR, DECERR) is an error; bit 0 (EXOKAY) is not used.
  wire r_ok = r_resp_i[1] == 1'b0;
  logic unused;
  assign unused = r_resp_i[0];
  logic [DataWidth-1:0] cur_data;
  logic [BusBytes-1:0]  cur_mask;       // rotated lanes of this beat that carry row bytes
  logic [DataWidth-1:0] merged_data;
  logic [BusBytes-1:0]  merged_mask;
  logic [BusBytes-1:0]  tail_mask;      // what a flush beat would carry after this beat

  always_comb begin
    in_mask     = '0;
    cur_data    = '0;
    cur_mask    = '0;
    tail_mask   = '0;
    merged_data = '0;
    merged_mask = '0;
    if (row_valid_i && r_valid_i) begin  // read only when a beat is taken
      for (int l = 0; l < BusBytes; l++) begin
        in_mask[l] = (!first || l >= int'(row_src_off_i)) && (!last || l <= int'(last_lane));
      end
      cur_data  = rotl_data(r_data_i, rot);
      cur_mask  = rotl_mask(in_mask, rot);
      tail_mask = cur_mask & low_lanes;
      for (int l = 0; l < BusBytes; l++) begin
        if (low_lanes[l]) begin
          merged_data[l*8 +: 8] = prev_data_q[l*8 +: 8];
          merged_mask[l]        = prev_mask_q[l] && !first;
        end else begin
          merged_data[l*8 +: 8] = cur_data[l*8 +: 8];
          merged_mask[l]        = cur_mask[l];
        end
      end
    end
  end

  // A beat is taken when the FIFO can hold its output (even an empty one: keeps it simple).
  wire take_beat = row_valid_i && !flush_q && r_valid_i && out_ready_i && !drop_i;
  wire row_done  = (take_beat && last && (tail_mask == '0))
                 || (flush_q && out_ready_i && !drop_i);

  assign r_ready_o   = drop_i || (row_valid_i && !flush_q && out_ready_i);
  assign row_ready_o = row_done;

  always_comb begin
    if (flush_q) begin
      out_data_o  = prev_data_q;
      out_strb_o  = prev_mask_q & low_lanes;
      out_valid_o = !drop_i;
    end else begin
      out_data_o  = merged_data;
      // Bytes of an errored beat are not written: the transfer fails, the memory keeps
      // its old contents rather than garbage.
      out_strb_o  = r_ok ? merged_mask : '0;
      out_valid_o = take_beat && (merged_mask != '0);
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      beat_idx_q  <= '0;
      flush_q     <= 1'b0;
      prev_data_q <= '0;
      prev_mask_q <= '0;
    end else if (clear_i || drop_i) begin
      beat_idx_q  <= '0;
      flush_q     <= 1'b0;
      prev_mask_q <= '0;
    end else if (take_beat) begin
      prev_data_q <= cur_data;
      prev_mask_q <= r_ok ? cur_mask : '0;
      if (last) begin
        beat_idx_q <= '0;
        flush_q    <= (tail_mask != '0);
      end else begin
        beat_idx_q <= beat_idx_q + 1'b1;
      end
    end else if (flush_q && out_ready_i) begin
      flush_q <= 1'b0;
    end
  end

  // Events for the core: errors and delivered byte counts.
  always_comb begin
    r_error_o    = r_valid_i && r_ready_o && !r_ok;
    bytes_read_o = '0;
    if (take_beat && r_ok) begin
      for (int l = 0; l < BusBytes; l++) bytes_read_o += 32'(in_mask[l]);
    end
  end
endmodule

`default_nettype wire
