SC = dict(world=4, steps=[1,2,3,4],
  phases=[('compute',3000.0),('coll','tp','all_gather',200000),('compute',2000.0),('coll','dp','allreduce',1000000),('compute',500.0)],
  groups={'tp':[('1',[0,1]),('2',[2,3])], 'dp':[('3',[0,2]),('4',[1,3])]},
  extra_compute={(3,2):3000.0})
