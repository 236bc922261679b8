#!/usr/bin/env sysbench
-- Batched key lookups, as RonDB's key-lookup benchmark makes them: each
-- event reads `--keys` random rows of one table by primary key with one
-- prepared SELECT … WHERE id IN (?, ?, …). Uses the tables of sysbench's
-- own OLTP scripts (prepare them with oltp_point_select).

require("oltp_common")

sysbench.cmdline.options.keys = {"Keys each SELECT reads with one IN list", 100}

function prepare_statements()
   local n = sysbench.opt.keys
   local marks = string.rep("?,", n - 1) .. "?"
   for t = 1, sysbench.opt.tables do
      stmt[t].inlist = con:prepare(string.format(
         "SELECT id, c FROM sbtest%d WHERE id IN (%s)", t, marks))
      param[t].inlist = {}
      for i = 1, n do
         param[t].inlist[i] = stmt[t].inlist:bind_create(sysbench.sql.type.INT)
      end
      stmt[t].inlist:bind_param(unpack(param[t].inlist))
   end
end

function event()
   local t = sysbench.rand.uniform(1, sysbench.opt.tables)
   for i = 1, sysbench.opt.keys do
      param[t].inlist[i]:set(sysbench.rand.default(1, sysbench.opt.table_size))
   end
   stmt[t].inlist:execute()
end
