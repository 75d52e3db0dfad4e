select name from @schema@.jobs where name = $1 @for_update@
