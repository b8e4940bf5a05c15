"""What drives a cluster from outside its processes: the launcher (`epoch-broker cluster`) and the admin
commands (`epoch-broker admin`). It may import anything below it; nothing in `broker/` imports it."""
