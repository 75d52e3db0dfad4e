delete from @schema@.daemons where id = $1
